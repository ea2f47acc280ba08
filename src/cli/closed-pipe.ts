/** What a writer whose reader went away exits with: 128 + SIGPIPE, as shells show it. */
export const EXIT_CLOSED_PIPE = 141;
