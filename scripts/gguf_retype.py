#!/usr/bin/env python3
"""Rewrite chosen tensors of a GGUF file as random valid blocks of another type.

For benchmarks of the i-quant and MXFP4 kernels on real model shapes without a quantizer:
  scripts/gguf_retype.py [--set-u32 KEY=V]... [--dim OLD=NEW]... IN.gguf OUT.gguf RULE...
  e.g. scripts/gguf_retype.py in.gguf out.gguf 'ffn_(gate|up)_exps=IQ1_S' 'ffn_down_exps=IQ2_XXS'
Each RULE is REGEX=TYPE (TYPE: an i-quant, MXFP4, Q4_K or Q6_K); the first rule whose regex
matches (re.search) a tensor name applies. --dim renames a dimension of the rewritten
expert tensors (names with _exps or _shexp: every dim equal to OLD becomes NEW) and --set-u32 an integer hyper-parameter, so
that a model made quickly with small experts gets its real expert size. A 256-element type on a tensor whose rows are not a multiple of 256 falls back to
IQ4_NL, as llama-quantize does. The new blocks hold random bits with one valid scale per
tensor, chosen so that weights are O(0.02) (the values are not a model; only their speed
and validity matter). Everything else (metadata, other tensors) is copied unchanged.
"""
import os
import re
import struct
import sys

TYPES = {  # name: (id, block elements, block bytes)
    "IQ2_XXS": (16, 256, 66), "IQ2_XS": (17, 256, 74), "IQ3_XXS": (18, 256, 98), "IQ1_S": (19, 256, 50),
    "IQ4_NL": (20, 32, 18), "IQ3_S": (21, 256, 110), "IQ2_S": (22, 256, 82), "IQ4_XS": (23, 256, 136),
    "IQ1_M": (29, 256, 56), "MXFP4": (39, 32, 17), "Q4_K": (12, 256, 144), "Q6_K": (14, 256, 210),
}
# Existing tensor types: id -> (block elements, block bytes).
SIZES = {0: (1, 4), 1: (1, 2), 30: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
         10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210)}
SIZES.update({v[0]: (v[1], v[2]) for v in TYPES.values()})
# Typical |value| of a unit-scale weight, so that d = 0.02 / typical.
TYPICAL = {"IQ2_XXS": 50.0, "IQ2_XS": 50.0, "IQ2_S": 50.0, "IQ3_XXS": 120.0, "IQ3_S": 128.0, "IQ1_S": 8.0,
           "IQ1_M": 8.0, "IQ4_NL": 60.0, "IQ4_XS": 960.0, "Q4_K": 300.0, "Q6_K": 600.0}
HALF_AT = {"Q4_K": (0, 2), "Q6_K": (208,)}  # K-quant half fields; the i-quants' d is at 0
VALUE_FMT = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


class Reader:
    def __init__(self, data):
        self.d, self.o = data, 0

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.d, self.o)
        self.o += struct.calcsize("<" + fmt)
        return v[0] if len(v) == 1 else v

    def string(self):
        n = self.take("Q")
        s = self.d[self.o:self.o + n]
        self.o += n
        return s

    def value(self, t):
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.take("I"), self.take("Q")
            return [self.value(et) for _ in range(n)]
        return self.take(VALUE_FMT[t])


def half_bits(x):
    return struct.unpack("<H", struct.pack("<e", x))[0]


def random_blocks(name, n_blocks):
    _, _, size = TYPES[name]
    buf = bytearray(os.urandom(n_blocks * size))
    if name == "MXFP4":
        buf[0::size] = bytes([120]) * n_blocks  # 2^-8: values up to 12 * 2^-8
        return buf
    h = half_bits(0.02 / TYPICAL[name])
    if name == "IQ1_M":  # the half's 4 nibbles are the top nibbles of the 4 scale words (bytes 49, 51, 53, 55)
        for k in range(4):
            buf[49 + 2 * k::size] = bytes([((h >> (4 * k)) & 0xF) << 4 | 0x5]) * n_blocks
        return buf
    for at in HALF_AT.get(name, (0,)):
        buf[at::size] = bytes([h & 0xFF]) * n_blocks
        buf[at + 1::size] = bytes([h >> 8]) * n_blocks
    return buf


def main(argv):
    args, set_u32, dim_map = argv[1:], {}, {}
    while args and args[0] in ("--set-u32", "--dim"):
        k, _, v = args[1].partition("=")
        if args[0] == "--set-u32":
            set_u32[k.encode()] = int(v)
        else:
            dim_map[int(k)] = int(v)
        args = args[2:]
    if len(args) < 3:
        sys.exit(__doc__)
    src, dst, rules = args[0], args[1], []
    for r in args[2:]:
        pat, _, t = r.rpartition("=")
        if t not in TYPES:
            sys.exit(f"gguf_retype: unknown type '{t}' in rule '{r}' (one of {', '.join(TYPES)})")
        rules.append((re.compile(pat), t))
    data = open(src, "rb").read()
    rd = Reader(data)
    magic, version, n_tensors, n_kv = rd.take("4sIQQ")
    if magic != b"GGUF" or version < 2:
        sys.exit(f"gguf_retype: {src} is not a GGUF v2/v3 file")
    align = 32
    patches = []  # (offset, new u32)
    for _ in range(n_kv):
        key = rd.string()
        t = rd.take("I")
        at = rd.o
        v = rd.value(t)
        if key == b"general.alignment":
            align = v
        if key in set_u32:
            if t != 4:
                sys.exit(f"gguf_retype: {key.decode()} is not a u32")
            patches.append((at, set_u32.pop(key)))
    if set_u32:
        sys.exit(f"gguf_retype: no such metadata key: {', '.join(k.decode() for k in set_u32)}")
    kv_end = rd.o
    header = bytearray(data[24:kv_end])
    for at, v in patches:
        struct.pack_into("<I", header, at - 24, v)
    infos = []
    for _ in range(n_tensors):
        name = rd.string()
        nd = rd.take("I")
        dims = [rd.take("Q") for _ in range(nd)]
        t, off = rd.take("I"), rd.take("Q")
        infos.append([name, dims, t, off])
    data_start = (rd.o + align - 1) // align * align
    out_infos, payload, offset, changed = [], [], 0, 0
    for name, dims, t, off in infos:
        n_el = 1
        for d in dims:
            n_el *= d
        bs, ts = SIZES[t]
        blob = data[data_start + off:data_start + off + n_el // bs * ts]
        new_t = next((nt for pat, nt in rules if pat.search(name.decode())), None)
        if new_t is not None:
            if re.search(r"_(exps|shexp)\.", name.decode()):
                dims = [dim_map.get(d, d) for d in dims]
            n_el = 1
            for d in dims:
                n_el *= d
            if TYPES[new_t][1] == 256 and dims[0] % 256 != 0:
                new_t = "IQ4_NL"
            if dims[0] % TYPES[new_t][1] != 0:
                sys.exit(f"gguf_retype: {name.decode()}: rows of {dims[0]} do not fit {new_t}")
            t = TYPES[new_t][0]
            blob = random_blocks(new_t, n_el // TYPES[new_t][1])
            changed += 1
        out_infos.append((name, dims, t, offset))
        payload.append(blob)
        offset = (offset + len(blob) + align - 1) // align * align
    with open(dst, "wb") as f:
        f.write(struct.pack("<4sIQQ", magic, version, n_tensors, n_kv))
        f.write(header)
        for name, dims, t, off in out_infos:
            f.write(struct.pack("<Q", len(name)) + name + struct.pack("<I", len(dims)))
            f.write(b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", t, off))
        f.write(b"\0" * ((-f.tell()) % align))
        for blob in payload:
            f.write(blob)
            f.write(b"\0" * ((-len(blob)) % align))
    print(f"gguf_retype: {dst}: {changed} of {n_tensors} tensors rewritten", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv)
