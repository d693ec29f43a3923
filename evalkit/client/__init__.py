"""The measured client (core): the chat client and its HTTP/1.1 transport, HTTP errors, connecting to a server and
its essential probe, client read lag and worker processes, kernel receive stamps, which request fields a server
accepts (and their cache), the thinking-text split, synthetic prompts and token counting shared by measurements."""
