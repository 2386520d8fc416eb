/* The err_msg label of DCGM_FI_DEV_XID_ERRORS: dcgm-exporter's name for each XID. */
#pragma once

/* What an XID beyond the catalogue is called (dcgm-exporter's fallback text). */
#define XID_NAME_UNKNOWN "Unknown Error"

/* The name of xid, never NULL: "Graphics Engine Exception" for 13, "No Error" for 0. */
const char *xid_name(unsigned xid);
