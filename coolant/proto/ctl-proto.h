/* The cooling-controller serial protocol (docs/protocol.md), version 1.
 *
 * Portable: no heap allocation, no global state, only <stdint.h>, <stddef.h>, <string.h>,
 * <stdio.h> (snprintf). Shared by coold, coolsim, coolctl and usable in controller firmware.
 *
 * Error contract: functions return 0 (or a length) on success and a negative CTL_E_* code on
 * failure; ctl_strerror() names the code. Output parameters are written only on success. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CTL_PROTO_VERSION    1
#define CTL_FRAME_MAX        256 /* bytes from '$' to '\n' inclusive */
#define CTL_FIELDS_MAX       24
#define CTL_VERB_MAX         15
#define CTL_KEY_MAX          31
#define CTL_CURVE_POINTS_MAX 8
#define CTL_PUMPS_MAX        4
#define CTL_SENSORS_MAX      8

enum ctl_error {
    CTL_E_TOOLONG = 1, /* frame longer than CTL_FRAME_MAX */
    CTL_E_CHARACTER,   /* byte outside 0x20..0x7e in a frame */
    CTL_E_NOCHECKSUM,  /* no '*' followed by four hex digits before the line end */
    CTL_E_CHECKSUM,    /* checksum does not match the body */
    CTL_E_SYNTAX,      /* body does not follow "<kind> <id> <verb> key=value..." */
    CTL_E_KIND,        /* kind is not Q, R or E */
    CTL_E_ID,          /* id is not a decimal 0..65535 */
    CTL_E_VERB,        /* verb malformed */
    CTL_E_KEY,         /* field key malformed or repeated */
    CTL_E_VALUE,       /* field value malformed (unterminated quote, forbidden byte) */
    CTL_E_TOOMANY,     /* more than CTL_FIELDS_MAX fields */
    CTL_E_OVERFLOW,    /* writer: the frame would exceed CTL_FRAME_MAX */
    CTL_E_BADKEY,      /* settings: no such setting */
    CTL_E_BADVALUE,    /* settings: value refused (a reason is written to `why`) */
    CTL_E_NUMBER,      /* number malformed or out of range */
    CTL_E_TRUNCATED,   /* reader: a '$' arrived before the frame's line end */
    _CTL_E_MAX,
};

/* Returns a static, human-readable description of a CTL_E_* code (positive or negative). */
const char *ctl_strerror(int code);

/* CRC-16/CCITT-FALSE (poly 0x1021, init 0xffff). ctl_crc16("123456789", 9) == 0x29b1. */
uint16_t ctl_crc16(const void *data, size_t n);

enum ctl_kind {
    CTL_KIND_REQUEST = 'Q',
    CTL_KIND_REPLY = 'R',
    CTL_KIND_EVENT = 'E',
};

struct ctl_field {
    const char *key;
    const char *value; /* without quotes */
};

/* A parsed frame. All strings point into the frame's own `store`: a plain struct copy would
 * still point into the original, so copy frames with ctl_frame_copy(). */
struct ctl_frame {
    char kind;   /* an enum ctl_kind value */
    uint16_t id; /* request id or event sequence number */
    const char *verb;
    unsigned n_fields;
    struct ctl_field fields[CTL_FIELDS_MAX];
    char store[CTL_FRAME_MAX];
};

/* Parses one complete line: '$' body '*' crc, with or without the trailing "\r\n" or "\n".
 * `len` excludes nothing: pass the bytes as received (no NUL needed). The part from '$' to the
 * last CRC digit may be at most CTL_FRAME_MAX - 2 bytes, so that the frame with "\r\n" fits.
 * Returns 0 or -CTL_E_*; *ret is written only on success. */
int ctl_frame_parse(const char *line, size_t len, struct ctl_frame *ret);

/* Returns the value of field `key`, or NULL if the frame has no such field. */
const char *ctl_frame_get(const struct ctl_frame *f, const char *key);

/* Copies a frame; needed because the pointers inside point into the frame's own store. */
void ctl_frame_copy(struct ctl_frame *dst, const struct ctl_frame *src);

/* Builds a frame. Errors are sticky: the first failure is kept and reported by finish, so callers
 * can add fields without checking each call. */
struct ctl_writer {
    char buf[CTL_FRAME_MAX + 1]; /* NUL-terminated after finish */
    size_t len;
    int err; /* 0 or a negative CTL_E_* code */
};

void ctl_writer_begin(struct ctl_writer *w, char kind, uint16_t id, const char *verb);
/* Adds key=value; quotes the value when it is empty or holds a space. A value with '"', '$', '*'
 * or a byte outside 0x20..0x7e, or a malformed key, fails with CTL_E_VALUE / CTL_E_KEY. */
void ctl_writer_add(struct ctl_writer *w, const char *key, const char *value);
void ctl_writer_add_int(struct ctl_writer *w, const char *key, long value);
/* Adds a fixed-point value with two decimals: 3125 -> "31.25", -450 -> "-4.50". */
void ctl_writer_add_centi(struct ctl_writer *w, const char *key, long centi);
/* Appends "*CRC\r\n" (upper-case hex). Returns the frame length (w->buf holds the frame, NUL-
 * terminated) or the first error. Call it once per ctl_writer_begin(). */
int ctl_writer_finish(struct ctl_writer *w);

/* Assembles frames from a byte stream, resynchronising on '$'. */
struct ctl_reader {
    char buf[CTL_FRAME_MAX];
    size_t len;
    bool in_frame;          /* a '$' was seen and the frame is not complete */
    bool discarding;        /* the current frame was too long or bad; skip to the next '$' */
    unsigned long frames;   /* frames accepted */
    unsigned long rejected; /* frames rejected, for any reason */
};

void ctl_reader_init(struct ctl_reader *r);

/* Feeds one byte. Returns 1 when a frame is complete and valid (written to *ret), 0 when more
 * bytes are needed or the byte was noise outside any frame, and -CTL_E_* when a frame was
 * rejected (r->rejected has been incremented). A '$' inside a frame rejects that frame with
 * -CTL_E_TRUNCATED and starts a new one; a too long frame or a bad byte (-CTL_E_TOOLONG,
 * -CTL_E_CHARACTER) is rejected at once and the rest of it skipped up to the next '$'. */
int ctl_reader_push(struct ctl_reader *r, uint8_t byte, struct ctl_frame *ret);

/* Parses a decimal with up to two decimals into hundredths: "31.2" -> 3120. Range +-9999999.
 * Returns 0 or -CTL_E_NUMBER. */
int ctl_parse_centi(const char *s, long *ret);
/* Parses a decimal integer in [min, max]. Returns 0 or -CTL_E_NUMBER. */
int ctl_parse_long(const char *s, long min, long max, long *ret);
/* Formats hundredths as a decimal: with two decimals ("31.20", "-4.50", "42.00") or, when
 * `shortest`, without trailing zeros ("31.2", "-4.5", "42"). Returns the length or
 * -CTL_E_OVERFLOW when buf (NUL included) is too small. */
int ctl_format_centi(long centi, bool shortest, char *buf, size_t size);

/* A pump reading as STATUS carries it: "2410/55" is 2410 rpm at 55 % duty. rpm 0..1000000, duty
 * 0..100. parse returns 0 or -CTL_E_NUMBER; format returns the length, -CTL_E_NUMBER for values
 * out of range or -CTL_E_OVERFLOW. */
int ctl_pump_parse(const char *s, long *ret_rpm, int *ret_duty);
int ctl_pump_format(long rpm, int duty, char *buf, size_t size);

/* ---- Settings: what the controller keeps in EEPROM (docs/protocol.md §6). ---- */

struct ctl_curve_point {
    long temp_centi; /* °C * 100 */
    int duty;        /* whole percent */
};

struct ctl_curve {
    unsigned n;
    struct ctl_curve_point p[CTL_CURVE_POINTS_MAX];
};

struct ctl_limits {
    long warning_centi;
    long precritical_centi;
    long critical_centi;
    long flow_min_centi; /* L/min * 100 */
    unsigned cut_delay_s;
    unsigned halt_max_s;
};

struct ctl_settings {
    unsigned n_pumps; /* not a setting: fixed by the hardware */
    struct ctl_curve curve[CTL_PUMPS_MAX];
    int min_duty[CTL_PUMPS_MAX];
    struct ctl_limits limits;
    unsigned host_timeout_s;
};

/* Parses "30:40,45:70,55:100" (syntax only: 1..CTL_CURVE_POINTS_MAX points; the rules are
 * ctl_curve_check's). Returns 0 or -CTL_E_BADVALUE with a reason starting "curve", such as
 * "curve point 2: duty x is not a whole percent". Reasons never hold '"', '$' or '*'. */
int ctl_curve_parse(const char *s, struct ctl_curve *ret, char *why, size_t why_size);
/* Formats a curve as parse accepts it, shortest form ("30:40" or "30.5:40"). Returns length or
 * -CTL_E_OVERFLOW. */
int ctl_curve_format(const struct ctl_curve *c, char *buf, size_t size);
/* Checks a curve against the rules of §6 for pump number `pump` (from 1, used in the message).
 * Returns 0 or -CTL_E_BADVALUE with a reason such as
 * "pump 1 curve point 3: 55 C after 60 C; points must rise". */
int ctl_curve_check(const struct ctl_curve *c, unsigned pump, int min_duty, long critical_centi,
                    char *why, size_t why_size);
/* Duty (percent) for a temperature: linear between points rounded to the nearest whole percent
 * (halves up), held at the first/last duty outside them. 0 for an empty curve. */
int ctl_curve_duty(const struct ctl_curve *c, long temp_centi);

/* Checks the limits among themselves. Returns 0 or -CTL_E_BADVALUE with a reason. */
int ctl_limits_check(const struct ctl_limits *l, char *why, size_t why_size);

/* Fills the factory defaults of §6 for a controller with n_pumps pumps (1..CTL_PUMPS_MAX). */
void ctl_settings_defaults(struct ctl_settings *s, unsigned n_pumps);
/* Checks the whole configuration (every curve against its min duty and the critical limit, the
 * limits among themselves). Returns 0 or -CTL_E_BADVALUE with a reason. */
int ctl_settings_check(const struct ctl_settings *s, char *why, size_t why_size);
/* Applies the fields of a SET request (key=value each) all or none: on any unknown key
 * (-CTL_E_BADKEY), malformed value or failed whole-configuration check (-CTL_E_BADVALUE) *s is
 * left unchanged and why says which setting and why. */
int ctl_settings_apply(struct ctl_settings *s, const struct ctl_field *fields, unsigned n_fields,
                       char *why, size_t why_size);
/* Formats one setting's value as the controller reports it (docs/protocol.md §6): curves with
 * the shortest temperatures ("30:40,45.5:70"), the fixed-point limits with two decimals
 * ("42.00"), whole numbers as they are. Returns length, -CTL_E_BADKEY or -CTL_E_OVERFLOW. */
int ctl_settings_get(const struct ctl_settings *s, const char *key, char *buf, size_t size);
/* Calls fn (may be NULL) for each setting name of this configuration, in table order (curve and
 * min duty of each existing pump, then the limits, then host.timeout). The key string is valid
 * only during the call. Returns the number of names. */
unsigned ctl_settings_keys(const struct ctl_settings *s,
                           void (*fn)(const char *key, void *userdata), void *userdata);
