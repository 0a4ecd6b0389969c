"""Pages for people (SPEC §7): server-rendered, usable without JavaScript, in English and Japanese.

Every page resolves the workspace and the caller's membership through `member_page` (404 for a
workspace the caller does not belong to, like the workspace API). Writes go through the actions;
their refusals (`ApiError`) become form errors or messages in the reader's language. What the
templates show (labels, rows) is built by `memoryapp.pages.presenters`, the usage chart's geometry
by `memoryapp.pages.charts`.

One module per page (the URLconf, `memoryapp.pages.urls`, names each view): `home` (the entry
point), `agent_memories` (What Bundata remembers), `ai_memory`, `agent_access` and `ask_history`
(Settings), `usage`; `base` holds what they share (`member_page`, `page`, `add_api_error`).

Decisions where the SPEC is silent (the new credential's token, renaming an AI memory: in
`agent_access` and `ai_memory`):
- Destructive actions (delete one AI memory, delete all own agent memories, the owner's bulk delete)
  have a confirmation page (GET) and act only on POST; deleting one agent memory from its row acts
  at once, like the API, and says how many versions were erased.
"""
