from governed_memory import MemoryClient, errors

with MemoryClient() as memory:  # GAM_URL (default http://127.0.0.1:8000) and GAM_TOKEN
    memory.remember("travel", "Prefers an aisle seat; tickets to ada@example.com", key="seat")
    print(memory.recall("which seat on a plane?", namespace="travel").render())  # fenced, untrusted
    for note in memory.list(namespace="travel"):  # follows nextCursor page by page
        print(note.version, note.text, note.masked)  # 1 Prefers an aisle seat; tickets to [EMAIL] ['EMAIL']
    try:
        memory.remember("travel", "x", key="ada@example.com")
    except errors.PersonalData as refused:  # one class per error code
        print(refused.code, refused.details)
