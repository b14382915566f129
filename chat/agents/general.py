from .base import AgentSpec

agent = AgentSpec(
    id="general",
    name="General",
    description="a general helper with the same tools this chat has, for a self-contained piece of work.",
    instructions=(
        "You are a general-purpose subagent. Do the task you are given with the tools you have and "
        "answer with the result only. Cite sources with the numbers the tools give you, like [1]. You "
        "cannot ask the user questions: do your best with what you have."
    ),
    toolsets=None,
    max_iterations=5,
    start_message="General agent is working on it…",
)
