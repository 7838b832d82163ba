# The plugin SDK: kiln/plugin.h (installed with the other headers),
# kiln-plugin.pc, and plugins/hello, the smallest useful backend.
#
# hello is built here as a module beside the other plugins (top-level
# .libs, where KILN_PLUGIN_PATH points in tests) but not installed: it is
# an example. `make installcheck` (run by distcheck) builds it once more
# out of tree, against the installed headers through pkg-config alone, and
# loads it with the installed kiln.
noinst_LTLIBRARIES += kiln-hello.la
kiln_hello_la_SOURCES = plugins/hello/hello.c
kiln_hello_la_LDFLAGS = -module -avoid-version -shared -no-undefined \
	-export-symbols-regex '^kiln_backend_entry$$' -rpath $(abs_builddir)
kiln_hello_la_LIBADD = -lm

EXTRA_DIST += plugins/README.md plugins/hello/Makefile.example

installcheck-local: installcheck-hello
installcheck-hello:
	rm -rf hello-out-of-tree && mkdir hello-out-of-tree
	PKG_CONFIG_PATH="$(DESTDIR)$(libdir)/pkgconfig" \
	  $(MAKE) -C hello-out-of-tree -f $(abs_srcdir)/plugins/hello/Makefile.example \
	  SRCDIR=$(abs_srcdir)/plugins/hello CC="$(CC)"
	KILN_PLUGIN_PATH=$(abs_builddir)/hello-out-of-tree \
	  LD_LIBRARY_PATH="$(DESTDIR)$(libdir)$${LD_LIBRARY_PATH:+:$$LD_LIBRARY_PATH}" \
	  $(DESTDIR)$(bindir)/kiln backends > hello-out-of-tree/backends.txt
	grep -E '^hello +ABI' hello-out-of-tree/backends.txt
	grep -E 'available +host memory' hello-out-of-tree/backends.txt
	rm -rf hello-out-of-tree
.PHONY: installcheck-hello
