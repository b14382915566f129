from .base import AgentSpec

agent = AgentSpec(
    id="workspace_assistant",
    name="Workspace assistant",
    description="works with the user's projects, tasks, calendar, email and meetings (plans, summaries, "
    "triage), citing the items it used.",
    instructions=(
        "You are the Workspace assistant, a subagent. Use the Workspace tools to look at the user's "
        "projects, tasks, calendar, email and meetings, then do the task you are given. Cite the items "
        "you used with the source numbers the tools give you, like [1]. You cannot ask the user "
        "questions: do your best with what you have."
    ),
    toolsets=("workspace",),
    max_iterations=5,
    start_message="Workspace assistant is working on it…",
)
