/* A terminal for the container's command: a pseudo-terminal made in the container's own /dev/pts
 * (so the command has a named terminal, /dev/pts/0, as tty(1), screen and ssh prompts need),
 * its master handed to capsule, which relays between it and the caller's terminal. Internal to
 * the runtime.
 *
 * The caller's terminal is put in raw mode while the command runs, so Ctrl-C, Ctrl-Z and the
 * other special characters reach the container's terminal as bytes and its line discipline
 * turns them into signals for the container's foreground job; window size changes (SIGWINCH)
 * are applied to the container's terminal, which signals the job itself. */
#pragma once

#include <stdbool.h>

#include "lib/errmsg.h"

/* Whether the command gets a terminal: always with force (-t), else when stdin and stdout are
 * terminals and capsule is in the foreground (an interactive run; redirected output keeps its
 * bytes as they are). */
bool tty_wanted(bool force);

/* The socket pair that carries the master from the container to capsule: fds[0] capsule's end,
 * fds[1] the container's; both -1 without want. 0 or -errno with a message. */
int tty_channel(bool want, int fds[2], struct errmsg *e);

/* In the container, in the process about to exec the command: opens a new terminal on the
 * container's /dev/ptmx, sends its master over sock (SCM_RIGHTS) and closes sock, starts a new
 * session with the terminal as its controlling terminal, and puts it on stdin, stdout and
 * stderr, each of which only where that descriptor was a terminal, unless force. 0 or -errno
 * with a message. */
int tty_child_attach(int sock, bool force, struct errmsg *e);

/* The relay, in capsule. */
struct tty_relay;

/* Receives the master from sock (the command has started, so it is there), copies the
 * caller's window size to it and puts the caller's terminal, if stdin is one, in raw mode.
 * Returns 0 and the relay, or -errno with a message. */
int tty_relay_start(int sock, struct tty_relay **ret, struct errmsg *e);
/* The descriptors to poll: [0] the master, [1] stdin (-1 once at its end); each POLLIN. */
void tty_relay_fds(const struct tty_relay *t, int fds[2]);
/* Moves what is readable on either side (after poll said so). Returns false once the master
 * has nothing more to give (every process of the terminal has closed it). */
bool tty_relay_pump(struct tty_relay *t, bool master_ready, bool stdin_ready);
/* The caller's window size, again (on SIGWINCH). */
void tty_relay_resize(struct tty_relay *t);
/* Copies what the master still holds, restores the caller's terminal, frees. NULL is fine. */
void tty_relay_end(struct tty_relay *t);
