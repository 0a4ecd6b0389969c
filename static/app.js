// Progressive enhancement only: every page works without this file.
// A copy button for the one-time credential token (shown only when the script runs).
document.addEventListener("DOMContentLoaded", () => {
  for (const button of document.querySelectorAll("[data-copy-target]")) {
    const field = document.getElementById(button.dataset.copyTarget);
    if (!field) continue;
    button.hidden = false;
    const label = button.textContent;
    button.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(field.value);
      } catch {
        field.select();
        document.execCommand("copy");
      }
      button.textContent = button.dataset.copiedLabel || label;
      setTimeout(() => { button.textContent = label; }, 2000);
    });
  }
  const token = document.getElementById("new-token");
  if (token) token.addEventListener("focus", () => token.select());
});
