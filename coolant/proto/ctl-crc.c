/* CRC-16/CCITT-FALSE and the error names. */
#include "ctl-proto.h"

uint16_t ctl_crc16(const void *data, size_t n)
{
    const uint8_t *p = data;
    uint16_t crc = 0xffff;

    /* Bitwise rather than table-driven: frames are at most 256 bytes and a table would cost
     * 512 bytes of flash on the controller for no measurable gain. */
    for (size_t i = 0; i < n; i++) {
        crc ^= (uint16_t)(p[i] << 8);
        for (int bit = 0; bit < 8; bit++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

const char *ctl_strerror(int code)
{
    static const char *const names[_CTL_E_MAX] = {
        [0] = "success",
        [CTL_E_TOOLONG] = "frame too long",
        [CTL_E_CHARACTER] = "byte outside printable ASCII in frame",
        [CTL_E_NOCHECKSUM] = "missing or malformed checksum",
        [CTL_E_CHECKSUM] = "checksum mismatch",
        [CTL_E_SYNTAX] = "malformed frame body",
        [CTL_E_KIND] = "bad message kind",
        [CTL_E_ID] = "bad message id",
        [CTL_E_VERB] = "bad verb",
        [CTL_E_KEY] = "bad or repeated field key",
        [CTL_E_VALUE] = "bad field value",
        [CTL_E_TOOMANY] = "too many fields",
        [CTL_E_OVERFLOW] = "frame or buffer too small",
        [CTL_E_BADKEY] = "no such setting",
        [CTL_E_BADVALUE] = "value refused",
        [CTL_E_NUMBER] = "malformed or out-of-range number",
        [CTL_E_TRUNCATED] = "frame cut short by a new '$'",
    };

    /* Negating INT_MIN would overflow, so range-check before flipping the sign. */
    if (code < 0 && code > -_CTL_E_MAX)
        code = -code;
    if (code < 0 || code >= _CTL_E_MAX || !names[code])
        return "unknown error";
    return names[code];
}
