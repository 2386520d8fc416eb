/* A seccomp filter for a root of the container (--remap-root): the user namespace maps only the
 * caller's own uid and gid, so changing the owner of a file or a process's ids to any other
 * fails (EINVAL, EPERM), and package managers stop there: apt drops to its _apt user, dpkg
 * gives files to root:shadow, useradd writes files for new users. As enroot's root mode does,
 * these calls then succeed without effect: chown, fchown, lchown, fchownat, setuid, setgid,
 * setreuid, setregid, setresuid, setresgid, setfsuid, setfsgid, setgroups (and their 32-bit
 * variants for i386 programs). The process stays root over the user's own files, as before. */
#pragma once

#include "lib/errmsg.h"

/* Installs the filter on the calling thread (inherited by what it execs; also sets
 * no_new_privs). Returns 0, or -errno with a message. */
int id_filter_install(struct errmsg *e);
