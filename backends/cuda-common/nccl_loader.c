/* NCCL through dlopen (nccl_loader.h). */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "nccl_loader.h"

void kiln_nccl_version_text(int code, char *buf, size_t n) {
  if (code >= 20900) snprintf(buf, n, "%d.%d.%d", code / 10000, code % 10000 / 100, code % 100);
  else snprintf(buf, n, "%d.%d.%d", code / 1000, code % 1000 / 100, code % 100);
}

bool kiln_nccl_load(kiln_nccl *nccl, char *why, size_t why_size) {
  memset(nccl, 0, sizeof *nccl);
  dlerror();
  void *lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *e = dlerror();
    snprintf(why, why_size, "no libnccl.so.2 (%s)", e ? e : "not found");
    return false;
  }
  static const struct {
    size_t offset;
    const char *symbol;
  } entries[] = {
#define E(member, name) {offsetof(kiln_nccl, member), name}
      E(GetVersion, "ncclGetVersion"),   E(CommInitAll, "ncclCommInitAll"),
      E(CommDestroy, "ncclCommDestroy"), E(AllReduce, "ncclAllReduce"),
      E(AllGather, "ncclAllGather"),     E(GroupStart, "ncclGroupStart"),
      E(GroupEnd, "ncclGroupEnd"),       E(GetErrorString, "ncclGetErrorString"),
#undef E
  };
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
    void *sym = dlsym(lib, entries[i].symbol);
    if (!sym) {
      snprintf(why, why_size, "libnccl.so.2 lacks %s", entries[i].symbol);
      dlclose(lib);
      memset(nccl, 0, sizeof *nccl);
      return false;
    }
    /* an object pointer to a function pointer, without the cast C forbids */
    memcpy((char *)nccl + entries[i].offset, &sym, sizeof sym);
  }
  nccl->lib = lib;
  int v = 0;
  kiln_nccl_result r = nccl->GetVersion(&v);
  if (r != 0) {
    snprintf(why, why_size, "ncclGetVersion: %s", nccl->GetErrorString(r));
    kiln_nccl_unload(nccl);
    return false;
  }
  nccl->version = v;
  kiln_nccl_version_text(v, nccl->version_text, sizeof nccl->version_text);
  return true;
}

void kiln_nccl_unload(kiln_nccl *nccl) {
  if (nccl->lib) dlclose(nccl->lib);
  memset(nccl, 0, sizeof *nccl);
}
