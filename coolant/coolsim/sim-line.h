/* The serial line the daemon opens: a pseudo-terminal whose slave is reached through a symlink,
 * so the daemon's configured path stays the same while the tty behind it changes, as a USB
 * device's /dev/serial/by-id link does when the device re-enumerates. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "lib/errmsg.h"

struct sim_line {
    char *link;     /* the path the daemon opens */
    int fd;         /* pty master; -1 while unplugged */
    char slave[64]; /* /dev/pts/N */
    bool hup;       /* nobody has the slave open: output is dropped, not queued */
    unsigned long bytes_dropped;
};

/* Creates a pty in raw mode and points `link` at its slave, replacing a stale symlink (but
 * never a file that is not a symlink). Returns 0 or -errno with e filled. On success the line
 * owns a copy of link; release it with sim_line_close(). */
int sim_line_open(struct sim_line *l, const char *link, struct errmsg *e);

/* Pulls the cable: closes the master (the daemon's fd gets a hangup) and removes the link.
 * Nothing is sent or received until sim_line_replug(). */
void sim_line_unplug(struct sim_line *l);

/* Plugs the cable back: a new pty behind the same link. Returns 0 or -errno with e filled. */
int sim_line_replug(struct sim_line *l, struct errmsg *e);

/* Unplugs if plugged and frees the line. Safe on a line that failed to open. */
void sim_line_close(struct sim_line *l);

/* Refreshes l->hup (whether anybody has the slave open). Returns true when the line is plugged
 * and someone has it open. */
bool sim_line_check(struct sim_line *l);

/* Reads what the host sent, without blocking. Returns the byte count (0 when there is nothing,
 * the line is unplugged or the host closed it) or -errno. */
ssize_t sim_line_read(struct sim_line *l, void *buf, size_t size);

/* Sends bytes to the host if it is listening; otherwise, or when its input queue is full, they
 * are dropped and counted, as a USB device drops data nobody reads. */
void sim_line_write(struct sim_line *l, const void *buf, size_t len);
