/* Whether something accepts connections on a Unix socket, for the clients of gpunode's daemons:
 * when a request could not be sent, curl names the symptom ("Couldn't connect to server"), not
 * the errno a person can act on. In a file of its own, without libcurl, so that capsule (which
 * must not load it) can ask too. */
#pragma once

/* Connects once to the Unix stream socket at path, without sending anything. Returns 0, or
 * -ENAMETOOLONG, -ENOENT, -ECONNREFUSED, -EACCES, ... */
int socket_probe(const char *path);
