/* The simulated controller's firmware: request handling (docs/protocol.md §3-§6), events (§7,
 * §8), host tracking (§4) and the protection logic of sim-protect.h.
 *
 * It owns no file descriptor and reads no clock: the caller feeds it the host's bytes, ticks it
 * with the sensors' reading and the monotonic time in milliseconds, and gets every frame the
 * controller sends through ops->send. Unit tests drive it with a fake clock and capture frames. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctl-proto.h"
#include "lib/errmsg.h"
#include "sim-model.h"
#include "sim-protect.h"

#define SIM_FW_VERSION "2.4.1"
#define SIM_FW_MODEL   "CT-4"
#define SIM_FW_SERIAL  "CT4-SIM0001"
#define SIM_FW_CAPS    "curve,limits,halt"

enum sim_verb {
    SIM_VERB_HELLO,
    SIM_VERB_PING,
    SIM_VERB_STATUS,
    SIM_VERB_GET,
    SIM_VERB_SET,
    SIM_VERB_HALT,
    SIM_VERB_OTHER, /* answered with ERR code=badverb */
    _SIM_VERB_MAX,
};

struct sim_ctl_ops {
    /* Sends one complete frame to the host. Required. */
    void (*send)(const char *frame, size_t len, void *userdata);
    /* Writes settings to EEPROM; returns 0 or a negative errno with a message. Optional: without
     * it the settings live in memory only. */
    int (*save)(const struct ctl_settings *s, void *userdata, struct errmsg *e);
    /* Reads settings back from EEPROM after a reboot; returns 0 or a negative errno. Optional:
     * without it, or when it fails, the controller keeps the settings it had. */
    int (*load)(struct ctl_settings *ret, void *userdata, struct errmsg *e);
};

/* What happened during a run, for the report. Counts survive controller reboots. */
struct sim_ctl_stats {
    unsigned long frames;   /* valid frames received */
    unsigned long rejected; /* frames rejected by the reader */
    unsigned long requests[_SIM_VERB_MAX];
    unsigned long errors; /* ERR replies */
    unsigned long alarms; /* ALARM events sent */
    unsigned boots;       /* BOOT events, the first included */
    unsigned host_lost;   /* times the host was counted lost */
    bool halt;            /* a HALT arrived at some time */
    uint64_t halt_ms;     /* when the first one did */
    bool cut;
    bool cut_orderly;
    uint64_t cut_ms;
    enum sim_level max_level;
    bool have_max_temp;
    long max_temp_centi;
};

struct sim_ctl {
    struct ctl_settings settings;
    struct sim_ctl_ops ops;
    void *userdata;
    struct sim_protect protect;
    struct ctl_reader reader;
    struct sim_reading reading; /* the latest, for STATUS */
    uint64_t boot_ms;
    uint64_t next_hb_ms;
    uint64_t next_alarm_ms;
    uint16_t event_seq;
    bool rebooting; /* silent until reboot_until_ms, then BOOT reason=watchdog */
    uint64_t reboot_until_ms;
    uint64_t host_seen_ms; /* last valid request, or boot */
    bool host_lost;
    unsigned eeprom_write_ms; /* how long an EEPROM write keeps SET busy */
    uint64_t eeprom_busy_until_ms;
    struct sim_ctl_stats stats;
};

/* Powers the controller up with settings s (validated by the caller) and sends BOOT
 * reason=power. ops is copied; ops->send must be set. */
void sim_ctl_init(struct sim_ctl *c, const struct ctl_settings *s, const struct sim_ctl_ops *ops,
                  void *userdata, uint64_t now_ms);

/* Feeds bytes received from the host: complete requests are answered through ops->send,
 * rejected frames are counted and never answered. Ignored while rebooting or after the cut.
 * A valid request marks the host seen after it is answered, so the first STATUS of a host that
 * had been counted lost says host=lost. */
void sim_ctl_feed(struct sim_ctl *c, const void *data, size_t n, uint64_t now_ms);

/* Runs the controller's periodic work with a fresh reading: protection, ALARM and HB events,
 * host-lost tracking, the end of a reboot. Returns 1 when it has just cut host power (POWER
 * action=cut was sent; the host is dead from now on), else 0. */
int sim_ctl_tick(struct sim_ctl *c, const struct sim_reading *r, uint64_t now_ms);

/* The duty (%) the controller commands for pump `pump` (from 0). Pumps run at 100 % while the
 * controller reboots, as a real board's PWM pull-ups make them. */
int sim_ctl_duty(const struct sim_ctl *c, unsigned pump);

/* Reboots the controller as its watchdog would: silent for silent_ms (requests are lost), then
 * BOOT reason=watchdog with settings reloaded through ops->load, uptime from zero and no memory
 * of the host (halt=0). */
void sim_ctl_reboot(struct sim_ctl *c, unsigned silent_ms, uint64_t now_ms);

/* Makes every accepted SET keep the EEPROM busy for ms milliseconds (0: writes are instant);
 * a SET arriving meanwhile is answered ERR code=busy. */
void sim_ctl_set_eeprom_write_ms(struct sim_ctl *c, unsigned ms);

/* Controller uptime in seconds. */
unsigned long sim_ctl_uptime(const struct sim_ctl *c, uint64_t now_ms);

/* Protocol verb of a sim_verb, e.g. "HELLO"; "other" for SIM_VERB_OTHER. */
const char *sim_verb_name(enum sim_verb v);
