#!/bin/bash
cd /app/catalog
cat > Makefile <<'MK'
PARTS := $(wildcard src/parts/*.csv)
JSON := $(PARTS:src/parts/%.csv=build/parts/%.json)

all: build/catalog.json build/index.txt

build/parts/%.json: src/parts/%.csv tools/csv2json.py | build/parts
    python3 tools/csv2json.py $< $@

build/catalog.json: $(JSON) tools/merge.py
    python3 tools/merge.py $@ $(JSON)

build/index.txt: $(PARTS) tools/index.awk | build
    awk -F, -f tools/index.awk $(PARTS) | LC_ALL=C sort > $@

build build/parts:
    mkdir -p $@

clean:
    rm -rf build

.PHONY: all clean
MK
sed -i 's/^    /\t/' Makefile
make clean && make -j4 && make
