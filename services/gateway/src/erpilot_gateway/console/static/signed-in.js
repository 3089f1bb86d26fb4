// The sign-in link carried the token in its URL: replace that history entry, then open the console
// without adding one, so neither Back nor the history shows the token again.
history.replaceState(null, "", "/");
location.replace("/");
