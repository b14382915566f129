"""Code: the agent runs Python in the chat's sandbox (sandbox/), with the chat's files at /data;
what the code writes to /output comes back as the chat's files (`toolsets.code.tools`)."""
