/* A stand-in for one of the NVIDIA driver's libraries in the test driver tree: a shared object
 * with the right soname (set by meson's link arguments) and one symbol that says which one it
 * is, so that a test inside a container can tell which file was injected. */
const char *capsule_stub_library(void);

const char *capsule_stub_library(void)
{
    return STUB_NAME " " STUB_VERSION;
}
