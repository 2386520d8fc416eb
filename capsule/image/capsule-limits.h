/* The sizes capsule accepts from registries and from its own cache, in one place: what a pull
 * takes, a run must take too. */
#pragma once

/* Manifests and indexes: Docker's registry refuses larger ones. */
#define CAPSULE_MANIFEST_MAX (4u << 20)
/* Image configs carry the history of every layer and can grow to megabytes (5 MB were seen in a
 * real image); a larger blob is not a config. */
#define CAPSULE_CONFIG_MAX (16u << 20)
/* The default of max_layer_size (capsule-config.h): the largest compressed layer a pull takes
 * unless configured otherwise. The largest layers of NGC framework images are a few GiB. */
#define CAPSULE_LAYER_SIZE_DEFAULT (64ull << 30)
/* The default of max_unpacked_size: what one layer's files may hold once unpacked. The largest
 * layers of real images unpack to tens of GiB; a bomb (a few KiB of compressed zeros) to any
 * size at all. */
#define CAPSULE_UNPACKED_SIZE_DEFAULT (256ull << 30)
/* Free space an unpack leaves on the cache's file system: past this it stops (checked every
 * 64 MiB written), so that a layer cannot take the last of a disk others use too. */
#define CAPSULE_UNPACK_RESERVE (1ull << 30)
/* Layers of one image, and manifests of one index. Docker stops at 127 layers; the margin is for
 * images built otherwise. */
#define CAPSULE_LAYERS_MAX 1024
