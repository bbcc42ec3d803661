#!/bin/sh
# Given libdsmemtrace.so, when its dynamic symbol table is read,
# then it exports exactly the names of interpose/exports.map's global list,
# unversioned, and has no NEEDED entry for the libraries it must load lazily.
set -eu
lib=$1 expected=$2
nm_out=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort)
# the names between "global:" and "local:", comments stripped
want=$(sed -e 's#/\*.*\*/##g' "$expected" | sed -n '/global:/,/local:/p' | sed -e 's/global://; s/local:.*//' |
	tr ';' '\n' | tr -d ' \t' | grep -v '^$' | sort)
[ -n "$want" ] || { echo "no names found in $expected"; exit 1; }
if [ "$nm_out" != "$want" ]; then
	echo "exported symbols differ from $expected:"
	printf '%s\n' "$nm_out" >/tmp/dsmt-exports.$$
	printf '%s\n' "$want" | diff - /tmp/dsmt-exports.$$ || true
	rm -f /tmp/dsmt-exports.$$
	exit 1
fi
# versioned definitions show as name@@VERSION in the dynamic symbol table
if readelf --dyn-syms -W "$lib" | awk '$7 != "UND"' | grep -q '@'; then
	echo "versioned exports found:"; readelf --dyn-syms -W "$lib" | awk '$7 != "UND"' | grep '@'
	exit 1
fi
if readelf -d "$lib" | grep NEEDED | grep -E 'libcuda|libcudart|libcupti|libpython|libunwind'; then
	echo "forbidden NEEDED entry"
	exit 1
fi
# the exported hooks must not be weak: glibc ignores weakness for interposition, but other loaders may not
if nm -D --defined-only "$lib" | awk '$2 == "W" || $2 == "V"' | grep .; then
	echo "weak exports"
	exit 1
fi
echo "exports ok: $(printf '%s\n' "$nm_out" | wc -l) symbols"
