/* berth/pause (docs/images.md): the process that holds a pod's namespaces. It sleeps until SIGTERM
 * or SIGINT and exits 0; as PID 1 of a pod with a shared PID namespace it reaps the zombies
 * reparented to it. Built by hack/images.ts with gcc -static -Os. */
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) { (void)sig; _exit(0); }

static void reap(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {}
}

int main(void) {
  struct sigaction sa = {0};
  sa.sa_handler = stop;
  if (sigaction(SIGTERM, &sa, NULL) < 0 || sigaction(SIGINT, &sa, NULL) < 0) return 1;
  sa.sa_handler = reap;
  sa.sa_flags = SA_NOCLDSTOP | SA_RESTART;
  if (sigaction(SIGCHLD, &sa, NULL) < 0) return 2;
  if (getpid() != 1) fprintf(stderr, "pause: warning: not running as PID 1\n");
  for (;;) pause();
}
