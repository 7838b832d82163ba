# Fuzz targets, one per parser (tests/fuzz/fuzz_<target>.c, each a
# libFuzzer LLVMFuzzerTestOneInput), and their seed corpora
# (tests/fuzz/corpus/<target>/, README.md there says how each was made).
#
#   make check   replays every corpus through its target, under ASan and
#                UBSan where configure found them, measuring each input's
#                peak heap (fuzz_<target>_replay, tests/fuzz/fuzz_replay.c)
#   make fuzz    builds each target with clang's libFuzzer (FUZZ_CC) and
#                runs it for FUZZ_TIME seconds (default 60), or FUZZ_RUNS
#                inputs, of at most FUZZ_MAX_LEN bytes (default 4096), in
#                turn (FUZZ_TARGETS: a subset), under nice,
#                growing a scratch corpus in tests/fuzz/work/<target>/ from
#                the seeds; a finding stops with the input saved there
fuzz_targets = gguf config tokenizer_spm tokenizer_bpe chat kcache_entry

# The parsers, compiled once with the sanitizers for every replay.
check_LTLIBRARIES += tests/fuzz/libkilnfuzzcore.la
tests_fuzz_libkilnfuzzcore_la_SOURCES = \
	$(kiln_base_sources) $(kiln_config_sources) $(kiln_gguf_sources) \
	$(kiln_tokenizer_sources) $(kiln_kcache_sources)
tests_fuzz_libkilnfuzzcore_la_CPPFLAGS = $(AM_CPPFLAGS) $(kiln_core_internal_cppflags)
tests_fuzz_libkilnfuzzcore_la_CFLAGS = $(AM_CFLAGS) $(KILN_SAN_CFLAGS) $(INIH_CFLAGS) \
	$(PCRE2_CFLAGS) $(XXHASH_CFLAGS)
tests_fuzz_libkilnfuzzcore_la_LIBADD = $(INIH_LIBS) $(PCRE2_LIBS) $(XXHASH_LIBS) -lm

fuzz_replay_cppflags = $(AM_CPPFLAGS) $(kiln_core_internal_cppflags) -I$(top_srcdir)/tests \
	-DKILN_FUZZ_MODELS_DIR='"$(KILN_MODELS_DIR_DEFAULT)"'
fuzz_replay_cflags = $(AM_CFLAGS) $(KILN_SAN_CFLAGS)
fuzz_replay_ldflags = $(KILN_SAN_CFLAGS) $(heap_count_ldflags)
fuzz_replay_sources = tests/fuzz/fuzz_replay.c $(heap_count_sources)
fuzz_replay_ldadd = tests/fuzz/libkilnfuzzcore.la -lm
fuzz_vocab_headers = tests/fuzz/fuzz_vocab.h tests/fuzz/fuzz_tokenizer.h

fuzz_replays = tests/fuzz/fuzz_gguf_replay tests/fuzz/fuzz_config_replay \
	tests/fuzz/fuzz_tokenizer_spm_replay tests/fuzz/fuzz_tokenizer_bpe_replay \
	tests/fuzz/fuzz_chat_replay tests/fuzz/fuzz_kcache_entry_replay
check_PROGRAMS += $(fuzz_replays)
TESTS += $(fuzz_replays)

tests_fuzz_fuzz_gguf_replay_SOURCES = tests/fuzz/fuzz_gguf.c $(fuzz_replay_sources)
tests_fuzz_fuzz_gguf_replay_CPPFLAGS = $(fuzz_replay_cppflags) -DFUZZ_TARGET='"gguf"'
tests_fuzz_fuzz_gguf_replay_CFLAGS = $(fuzz_replay_cflags)
tests_fuzz_fuzz_gguf_replay_LDFLAGS = $(fuzz_replay_ldflags)
tests_fuzz_fuzz_gguf_replay_LDADD = $(fuzz_replay_ldadd)

tests_fuzz_fuzz_config_replay_SOURCES = tests/fuzz/fuzz_config.c $(fuzz_replay_sources)
tests_fuzz_fuzz_config_replay_CPPFLAGS = $(fuzz_replay_cppflags) -DFUZZ_TARGET='"config"'
tests_fuzz_fuzz_config_replay_CFLAGS = $(fuzz_replay_cflags)
tests_fuzz_fuzz_config_replay_LDFLAGS = $(fuzz_replay_ldflags)
tests_fuzz_fuzz_config_replay_LDADD = $(fuzz_replay_ldadd)

tests_fuzz_fuzz_tokenizer_spm_replay_SOURCES = tests/fuzz/fuzz_tokenizer_spm.c \
	$(fuzz_vocab_headers) $(fuzz_replay_sources)
tests_fuzz_fuzz_tokenizer_spm_replay_CPPFLAGS = $(fuzz_replay_cppflags) -DFUZZ_TARGET='"tokenizer_spm"'
tests_fuzz_fuzz_tokenizer_spm_replay_CFLAGS = $(fuzz_replay_cflags)
tests_fuzz_fuzz_tokenizer_spm_replay_LDFLAGS = $(fuzz_replay_ldflags)
tests_fuzz_fuzz_tokenizer_spm_replay_LDADD = $(fuzz_replay_ldadd)

tests_fuzz_fuzz_tokenizer_bpe_replay_SOURCES = tests/fuzz/fuzz_tokenizer_bpe.c \
	$(fuzz_vocab_headers) $(fuzz_replay_sources)
tests_fuzz_fuzz_tokenizer_bpe_replay_CPPFLAGS = $(fuzz_replay_cppflags) -DFUZZ_TARGET='"tokenizer_bpe"'
tests_fuzz_fuzz_tokenizer_bpe_replay_CFLAGS = $(fuzz_replay_cflags)
tests_fuzz_fuzz_tokenizer_bpe_replay_LDFLAGS = $(fuzz_replay_ldflags)
tests_fuzz_fuzz_tokenizer_bpe_replay_LDADD = $(fuzz_replay_ldadd)

tests_fuzz_fuzz_chat_replay_SOURCES = tests/fuzz/fuzz_chat.c $(fuzz_vocab_headers) \
	$(fuzz_replay_sources)
tests_fuzz_fuzz_chat_replay_CPPFLAGS = $(fuzz_replay_cppflags) -DFUZZ_TARGET='"chat"'
tests_fuzz_fuzz_chat_replay_CFLAGS = $(fuzz_replay_cflags)
tests_fuzz_fuzz_chat_replay_LDFLAGS = $(fuzz_replay_ldflags)
tests_fuzz_fuzz_chat_replay_LDADD = $(fuzz_replay_ldadd)

tests_fuzz_fuzz_kcache_entry_replay_SOURCES = tests/fuzz/fuzz_kcache_entry.c $(fuzz_replay_sources)
tests_fuzz_fuzz_kcache_entry_replay_CPPFLAGS = $(fuzz_replay_cppflags) -DFUZZ_TARGET='"kcache_entry"'
tests_fuzz_fuzz_kcache_entry_replay_CFLAGS = $(fuzz_replay_cflags)
tests_fuzz_fuzz_kcache_entry_replay_LDFLAGS = $(fuzz_replay_ldflags)
tests_fuzz_fuzz_kcache_entry_replay_LDADD = $(fuzz_replay_ldadd)

# The GGUF target again over 100000 deterministic mutations of writer-made
# files (cut, bit-flipped, fields set to boundary values).
check_PROGRAMS += tests/fuzz/fuzz_gguf_smoke
TESTS += tests/fuzz/fuzz_gguf_smoke
tests_fuzz_fuzz_gguf_smoke_SOURCES = tests/fuzz/fuzz_gguf_smoke.c tests/fuzz/fuzz_gguf.c
tests_fuzz_fuzz_gguf_smoke_CPPFLAGS = $(fuzz_replay_cppflags)
tests_fuzz_fuzz_gguf_smoke_CFLAGS = $(fuzz_replay_cflags)
tests_fuzz_fuzz_gguf_smoke_LDFLAGS = $(KILN_SAN_CFLAGS)
tests_fuzz_fuzz_gguf_smoke_LDADD = $(fuzz_replay_ldadd)

EXTRA_DIST += tests/fuzz/corpus

# The binary seeds (GGUF files, cache entries, conversations) are written by
# this program; `make fuzz-seeds` rewrites them in the source tree.
check_PROGRAMS += tests/fuzz/make_seeds
tests_fuzz_make_seeds_SOURCES = tests/fuzz/make_seeds.c
tests_fuzz_make_seeds_CPPFLAGS = $(fuzz_replay_cppflags)
tests_fuzz_make_seeds_CFLAGS = $(fuzz_replay_cflags)
tests_fuzz_make_seeds_LDFLAGS = $(KILN_SAN_CFLAGS)
tests_fuzz_make_seeds_LDADD = $(fuzz_replay_ldadd)
fuzz-seeds: tests/fuzz/make_seeds
	tests/fuzz/make_seeds $(srcdir)/tests/fuzz/corpus
.PHONY: fuzz-seeds

# ---- make fuzz: libFuzzer builds ------------------------------------------
# The parsers are compiled once, with libFuzzer's coverage, into
# tests/fuzz/libkilnfuzz.a; each target links it with -fsanitize=fuzzer.
FUZZ_CC = clang
FUZZ_TIME = 60
FUZZ_RUNS =
FUZZ_MAX_LEN = 4096
FUZZ_TARGETS = $(fuzz_targets)
FUZZ_CFLAGS = -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all
fuzz_cc = $(FUZZ_CC) $(FUZZ_CFLAGS) -std=c11 -DHAVE_CONFIG_H $(AM_CPPFLAGS) \
	-I$(top_srcdir)/core/src -I$(top_srcdir)/tests -I$(top_builddir) \
	-DKILN_FUZZ_MODELS_DIR='"$(KILN_MODELS_DIR_DEFAULT)"' $(INIH_CFLAGS) $(PCRE2_CFLAGS) $(XXHASH_CFLAGS)
fuzz_core_libs = $(INIH_LIBS) $(PCRE2_LIBS) $(XXHASH_LIBS) -lpthread -lm
fuzz_bins = tests/fuzz/fuzz_gguf_libfuzzer tests/fuzz/fuzz_config_libfuzzer \
	tests/fuzz/fuzz_tokenizer_spm_libfuzzer tests/fuzz/fuzz_tokenizer_bpe_libfuzzer \
	tests/fuzz/fuzz_chat_libfuzzer tests/fuzz/fuzz_kcache_entry_libfuzzer

tests/fuzz/libkilnfuzz.a: $(tests_fuzz_libkilnfuzzcore_la_SOURCES) config.h
	@rm -rf tests/fuzz/obj && $(MKDIR_P) tests/fuzz/obj && \
	for f in $(tests_fuzz_libkilnfuzzcore_la_SOURCES); do \
	  case $$f in *.c) ;; *) continue ;; esac; \
	  o=tests/fuzz/obj/`echo $$f | sed 's,/,_,g; s,\.c$$,.o,'`; \
	  echo "  CC(fuzz) $$f"; $(fuzz_cc) -fsanitize=fuzzer-no-link -c $(srcdir)/$$f -o $$o || exit 1; \
	done && rm -f $@ && $(AR) rcs $@ tests/fuzz/obj/*.o

fuzz-build: $(fuzz_bins)
$(fuzz_bins): tests/fuzz/libkilnfuzz.a $(srcdir)/tests/fuzz/fuzz_vocab.h $(srcdir)/tests/fuzz/fuzz_tokenizer.h
	$(AM_V_CCLD)t=`echo $@ | sed 's,^tests/fuzz/fuzz_,,; s,_libfuzzer$$,,'` && \
	$(fuzz_cc) -fsanitize=fuzzer $(srcdir)/tests/fuzz/fuzz_$$t.c tests/fuzz/libkilnfuzz.a \
	  $(fuzz_core_libs) -o $@

fuzz: fuzz-build
	@set -e; limit="-max_total_time=$(FUZZ_TIME)"; what="$(FUZZ_TIME) s"; \
	if [ -n "$(FUZZ_RUNS)" ]; then limit="-runs=$(FUZZ_RUNS)"; what="$(FUZZ_RUNS) runs"; fi; \
	for t in $(FUZZ_TARGETS); do \
	  work=tests/fuzz/work/$$t; rm -rf $$work; $(MKDIR_P) $$work/corpus; \
	  echo "fuzz: $$t for $$what"; \
	  KILN_MODELS_DIR="$${KILN_MODELS_DIR:-$(KILN_MODELS_DIR_DEFAULT)}" nice -n 10 \
	    tests/fuzz/fuzz_$${t}_libfuzzer $$limit -rss_limit_mb=2048 -max_len=$(FUZZ_MAX_LEN) \
	    -artifact_prefix=$$work/ -print_final_stats=1 $$work/corpus $(srcdir)/tests/fuzz/corpus/$$t \
	    2>$$work/log || { tail -40 $$work/log; echo "fuzz: $$t: finding, see $$work"; exit 1; }; \
	  grep -E "stat::number_of_executed_units|stat::average_exec_per_sec|Done" $$work/log \
	    | sed "s,^,fuzz: $$t: ,"; \
	done
.PHONY: fuzz fuzz-build
CLEANFILES += $(fuzz_bins) tests/fuzz/libkilnfuzz.a
clean-local: clean-fuzz-work
clean-fuzz-work:
	rm -rf tests/fuzz/work tests/fuzz/obj
.PHONY: clean-fuzz-work
