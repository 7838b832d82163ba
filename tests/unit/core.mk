# unit tests: core (status, config, plugin loader, sampler, planner)

# Deliberately broken plugins the loader must refuse. -rpath makes libtool
# build real shared modules although they are never installed.
broken_plugin_ldflags = -module -avoid-version -shared -rpath $(abs_builddir)
check_LTLIBRARIES += \
	tests/plugins/kiln-noentry.la \
	tests/plugins/kiln-broken-abi.la \
	tests/plugins/kiln-broken-minor.la \
	tests/plugins/kiln-broken-short.la \
	tests/plugins/kiln-broken-name.la \
	tests/plugins/kiln-broken-func.la \
	tests/plugins/kiln-broken-tiny.la \
	tests/plugins/kiln-broken-misaligned.la \
	tests/plugins/kiln-broken-oversize.la \
	tests/plugins/kiln-modes-23.la \
	tests/plugins/kiln-modes-22.la \
	tests/plugins/kiln-modes-23-short.la \
	tests/plugins/kiln-cfg-origin.la
tests_plugins_kiln_noentry_la_SOURCES = tests/plugins/broken_noentry.c
tests_plugins_kiln_noentry_la_LDFLAGS = $(broken_plugin_ldflags)
tests_plugins_kiln_broken_abi_la_SOURCES = tests/plugins/broken_abi.c tests/plugins/broken_common.h
tests_plugins_kiln_broken_abi_la_LDFLAGS = $(broken_plugin_ldflags)
tests_plugins_kiln_broken_minor_la_SOURCES = tests/plugins/broken_minor.c tests/plugins/broken_common.h
tests_plugins_kiln_broken_minor_la_LDFLAGS = $(broken_plugin_ldflags)
tests_plugins_kiln_broken_short_la_SOURCES = tests/plugins/broken_short.c tests/plugins/broken_common.h
tests_plugins_kiln_broken_short_la_LDFLAGS = $(broken_plugin_ldflags)
tests_plugins_kiln_broken_name_la_SOURCES = tests/plugins/broken_name.c tests/plugins/broken_common.h
tests_plugins_kiln_broken_name_la_LDFLAGS = $(broken_plugin_ldflags)
tests_plugins_kiln_broken_func_la_SOURCES = tests/plugins/broken_func.c
tests_plugins_kiln_broken_func_la_LDFLAGS = $(broken_plugin_ldflags)
tests_plugins_kiln_broken_tiny_la_SOURCES = tests/plugins/broken_tiny.c
tests_plugins_kiln_broken_tiny_la_LDFLAGS = $(broken_plugin_ldflags)
tests_plugins_kiln_broken_misaligned_la_SOURCES = tests/plugins/broken_misaligned.c
tests_plugins_kiln_broken_misaligned_la_LDFLAGS = $(broken_plugin_ldflags)
tests_plugins_kiln_broken_oversize_la_SOURCES = tests/plugins/broken_oversize.c tests/plugins/broken_common.h
tests_plugins_kiln_broken_oversize_la_LDFLAGS = $(broken_plugin_ldflags)
# describe_modes (ABI 2.3) across the minor versions: a plugin of 2.3 is
# asked, one of 2.2 never is, and one claiming 2.3 with 2.2's table is refused.
tests_plugins_kiln_modes_23_la_SOURCES = tests/plugins/modes_23.c tests/plugins/modes_common.h
tests_plugins_kiln_modes_23_la_LDFLAGS = $(broken_plugin_ldflags)
tests_plugins_kiln_modes_22_la_SOURCES = tests/plugins/modes_22.c tests/plugins/modes_common.h
tests_plugins_kiln_modes_22_la_LDFLAGS = $(broken_plugin_ldflags)
tests_plugins_kiln_modes_23_short_la_SOURCES = tests/plugins/modes_23_short.c tests/plugins/modes_common.h
tests_plugins_kiln_modes_23_short_la_LDFLAGS = $(broken_plugin_ldflags)
# cfg_origin (ABI 2.4): an open() refusal names where the value came from,
# through backends/common/config_origin.h as in the backends, and a host
# table of 2.3 gets the message without the place.
tests_plugins_kiln_cfg_origin_la_SOURCES = tests/plugins/cfg_origin.c
tests_plugins_kiln_cfg_origin_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/backends/common
tests_plugins_kiln_cfg_origin_la_LIBADD = backends/common/libkilnnodecheck.la
tests_plugins_kiln_cfg_origin_la_LDFLAGS = $(broken_plugin_ldflags)

check_PROGRAMS += tests/unit/test_status tests/unit/test_config tests/unit/test_plugin_loader \
	tests/unit/test_sampler tests/unit/test_golden
TESTS += tests/unit/test_status tests/unit/test_config tests/unit/test_plugin_loader \
	tests/unit/test_sampler tests/unit/test_golden
tests_unit_test_golden_SOURCES = tests/unit/test_golden.c
tests_unit_test_golden_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_golden_LDADD = $(TEST_LIBS)
tests_unit_test_status_SOURCES = tests/unit/test_status.c
tests_unit_test_status_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_status_LDADD = $(TEST_LIBS)
tests_unit_test_config_SOURCES = tests/unit/test_config.c
tests_unit_test_config_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_config_LDADD = $(TEST_LIBS)
tests_unit_test_plugin_loader_SOURCES = tests/unit/test_plugin_loader.c
tests_unit_test_plugin_loader_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_plugin_loader_LDADD = $(TEST_LIBS)
tests_unit_test_sampler_SOURCES = tests/unit/test_sampler.c
tests_unit_test_sampler_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_sampler_LDADD = $(TEST_LIBS)

check_PROGRAMS += tests/unit/test_kv_cache
TESTS += tests/unit/test_kv_cache
tests_unit_test_kv_cache_SOURCES = tests/unit/test_kv_cache.c
tests_unit_test_kv_cache_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_kv_cache_LDADD = $(TEST_LIBS)

check_PROGRAMS += tests/unit/test_plan_modes
TESTS += tests/unit/test_plan_modes
tests_unit_test_plan_modes_SOURCES = tests/unit/test_plan_modes.c
tests_unit_test_plan_modes_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_plan_modes_LDADD = $(TEST_LIBS)

# The CLI's placing of a describe_modes line among the configured modes.
check_PROGRAMS += tests/unit/test_cli_modes
TESTS += tests/unit/test_cli_modes
tests_unit_test_cli_modes_SOURCES = tests/unit/test_cli_modes.c cli/cli_common.c cli/cli_progress.c cli/cli.h
tests_unit_test_cli_modes_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/cli -DKILN_ABS_BUILDDIR='"$(abs_top_builddir)"'
tests_unit_test_cli_modes_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_cli_modes_LDADD = $(TEST_LIBS)

check_PROGRAMS += tests/unit/test_session_numerics tests/unit/test_synth
TESTS += tests/unit/test_session_numerics tests/unit/test_synth
tests_unit_test_session_numerics_SOURCES = tests/unit/test_session_numerics.c
tests_unit_test_session_numerics_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_session_numerics_LDADD = $(TEST_LIBS)
tests_unit_test_synth_SOURCES = tests/unit/test_synth.c
tests_unit_test_synth_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_synth_LDADD = $(TEST_LIBS)

check_PROGRAMS += tests/unit/test_escape
TESTS += tests/unit/test_escape
tests_unit_test_escape_SOURCES = tests/unit/test_escape.c
tests_unit_test_escape_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_escape_LDADD = $(TEST_LIBS)

check_PROGRAMS += tests/unit/test_chat
TESTS += tests/unit/test_chat
tests_unit_test_chat_SOURCES = tests/unit/test_chat.c
tests_unit_test_chat_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_chat_LDADD = $(TEST_LIBS)
