"""Files: documents and images attached to messages, their extracted text, and the Files toolset
that lets the agent read them (`toolsets.files.tools`)."""
