/* Settings persistence, the way a controller keeps them in EEPROM: one image with a CRC, written
 * whole and atomically, so a crash mid-write leaves either the old image or the new one.
 *
 * The image is text, one key=value line per setting of docs/protocol.md §6, a "pumps=" line for
 * the hardware it belongs to, and a final "crc=XXXX" line: CRC-16/CCITT-FALSE of every byte
 * before it. */
#pragma once

#include "ctl-proto.h"
#include "lib/errmsg.h"

enum {
    SIM_EEPROM_LOADED = 0,   /* the image was read and is valid */
    SIM_EEPROM_DEFAULTS = 1, /* no image yet: factory defaults */
    SIM_EEPROM_RESET = 2,    /* the image was corrupt: defaults, written back; e says why */
};

/* Reads the image at path for a controller with n_pumps pumps into *ret. Returns 0, -ENOENT
 * when there is no file, -EBADMSG when the image is corrupt (bad CRC, a line that is not a
 * setting, values the controller refuses, another pump count), or another -errno for I/O
 * errors; e says what and where. *ret is written only on success. */
int sim_eeprom_load(const char *path, unsigned n_pumps, struct ctl_settings *ret, struct errmsg *e);

/* Writes the image for s to path atomically: a temporary file beside it, fsync, rename, fsync
 * of the directory. Returns 0 or -errno with e filled; on failure the old image is untouched. */
int sim_eeprom_save(const char *path, const struct ctl_settings *s, struct errmsg *e);

/* Start-up policy: loads the image; without one uses factory defaults (SIM_EEPROM_DEFAULTS);
 * with a corrupt one uses the defaults, writes them over it and returns SIM_EEPROM_RESET with e
 * saying what was wrong, like a controller whose EEPROM CRC fails. Returns a SIM_EEPROM_* value
 * (*ret written) or -errno when the file cannot be read or replaced. */
int sim_eeprom_open(const char *path, unsigned n_pumps, struct ctl_settings *ret, struct errmsg *e);
