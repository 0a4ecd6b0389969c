from typing import TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore

from governed_memory.langgraph import GovernedStore


class State(TypedDict, total=False):
    said: str
    recalled: list[str]


def chat(state: State, *, store: BaseStore) -> State:
    if state.get("said"):  # ("travel",) is the namespace "travel"; the value's text is masked on the way in
        store.put(("travel",), "seat", {"text": state["said"], "kind": "preference"})
    return {"recalled": [item.value["text"] for item in store.search(("travel",), query="which seat on a plane?")]}


builder = StateGraph(State).add_node("chat", chat).add_edge(START, "chat").add_edge("chat", END)
graph = builder.compile(store=GovernedStore())
graph.invoke({"said": "Prefers an aisle seat; tickets to ada@example.com"})  # one run remembers…
print(graph.invoke({})["recalled"])  # …the next recalls: ['Prefers an aisle seat; tickets to [EMAIL]']
