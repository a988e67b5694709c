"""pldump: read and write the course's result files from Python (NumPy only).

    import pldump
    arrays = pldump.read("run.dump")     # {name: numpy array, or str for text}
    pldump.write("x.dump", {"meta/program": "test",
                            "loss": np.array([4.1, 3.9], np.float32)})

The format is the one common/dump.h describes (docs/dump-format.md): the magic
b"PLDUMP1\\n", then records of (u32 name length, name, u32 dtype, u32 ndim,
ndim u64 dimensions, row-major data), all little-endian. read() checks the file
as strictly as the C reader and raises DumpError with a sentence that says
what is wrong.

Run as a script to list a file's arrays:  python3 scripts/pldump.py FILE
"""
import struct
import sys

import numpy as np

MAGIC = b"PLDUMP1\n"
MAX_NAME = 4095          # bytes; longer means a damaged file
MAX_DIMS = 8
F32, F64, I64, TEXT = 0, 1, 2, 3
NUMERIC = {F32: np.dtype("<f4"), F64: np.dtype("<f8"), I64: np.dtype("<i8")}
NATIVE = {F32: np.float32, F64: np.float64, I64: np.int64}
TYPE_NAMES = {F32: "f32", F64: "f64", I64: "i64", TEXT: "text"}


class DumpError(ValueError):
    """The file is not a whole, well-formed dump."""


def read(path):
    """Read a whole dump: {name: array} in file order. Arrays come back in the
    host's native dtype (float32, float64, int64) and their shape (a scalar is a
    0-d array); texts come back as str."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        return parse(data)
    except DumpError as e:
        raise DumpError(f"{path}: {e}") from None


def parse(data):
    """The arrays of a dump held in memory (bytes), as read() returns them."""
    if len(data) < len(MAGIC) or data[:len(MAGIC)] != MAGIC:
        raise DumpError("not a dump file (bad magic)")
    pos = len(MAGIC)
    out = {}
    record = 0

    def u32(what):
        nonlocal pos
        if len(data) - pos < 4:
            raise DumpError(f"truncated: {what} ends early")
        (v,) = struct.unpack_from("<I", data, pos)
        pos += 4
        return v

    while pos < len(data):
        length = u32(f"record {record}")
        if length == 0 or length > MAX_NAME:
            raise DumpError(f"record {record} has a name length of {length} bytes; "
                            f"it must be 1 to {MAX_NAME} (damaged file?)")
        if len(data) - pos < length:
            raise DumpError(f"truncated: record {record} needs {length} bytes of name, "
                            f"{len(data) - pos} remain")
        raw = data[pos:pos + length]
        pos += length
        if b"\0" in raw:
            raise DumpError(f"the name of record {record} contains a NUL byte (damaged file?)")
        name = raw.decode("utf-8", errors="replace")
        dtype = u32(f"array '{name}'")
        if dtype not in TYPE_NAMES:
            raise DumpError(f"array '{name}' has unknown dtype {dtype} "
                            "(known: 0 f32, 1 f64, 2 i64, 3 text)")
        ndim = u32(f"array '{name}'")
        if ndim > MAX_DIMS:
            raise DumpError(f"array '{name}' has ndim {ndim}; at most {MAX_DIMS}")
        if len(data) - pos < 8 * ndim:
            raise DumpError(f"truncated: array '{name}' ends inside its shape")
        shape = struct.unpack_from(f"<{ndim}Q", data, pos)
        pos += 8 * ndim
        count = 1
        for d in shape:
            count *= d          # Python integers do not overflow ...
        if 0 not in shape and count >= 2**64:   # ... but the C reader's do
            raise DumpError(f"array '{name}' has a shape whose product overflows 64 bits")
        size = 1 if dtype == TEXT else NUMERIC[dtype].itemsize
        need = count * size
        if need > len(data) - pos:
            raise DumpError(f"truncated: array '{name}' needs {need} bytes, "
                            f"{len(data) - pos} remain")
        chunk = data[pos:pos + need]
        pos += need
        if name in out:
            raise DumpError(f"the name '{name}' appears twice; a dump's names must be unique")
        if dtype == TEXT:
            out[name] = chunk.decode("utf-8", errors="replace")
        else:
            values = np.frombuffer(chunk, dtype=NUMERIC[dtype]).astype(NATIVE[dtype])
            out[name] = values.reshape(shape)
        record += 1
    return out


def _encode(name, value):
    """One record's bytes."""
    if not isinstance(name, str) or not name:
        raise DumpError(f"array names must be non-empty strings, not {name!r}")
    raw = name.encode("utf-8")
    if len(raw) > MAX_NAME or b"\0" in raw:
        raise DumpError(f"array name {name[:40]!r}... is too long or contains a NUL byte")
    if isinstance(value, str):
        body = value.encode("utf-8")
        dtype, shape = TEXT, (len(body),)
    else:
        a = np.asarray(value)
        if a.dtype == np.float32:
            dtype = F32
        elif a.dtype == np.float64:
            dtype = F64
        elif a.dtype.kind in "iub" and (a.dtype.kind != "u" or a.dtype.itemsize < 8):
            dtype = I64      # every signed, bool or small unsigned integer fits in i64
        else:
            raise DumpError(f"array '{name}' has dtype {a.dtype}; a dump holds float32, "
                            "float64 and integers (stored as int64)")
        if a.ndim > MAX_DIMS:
            raise DumpError(f"array '{name}' has {a.ndim} dimensions; at most {MAX_DIMS}")
        shape = a.shape
        body = np.ascontiguousarray(a, dtype=NUMERIC[dtype]).tobytes()
    return (struct.pack("<I", len(raw)) + raw + struct.pack("<II", dtype, len(shape))
            + struct.pack(f"<{len(shape)}Q", *shape) + body)


def write(path, arrays):
    """Write {name: array or str} as a dump, in the dict's order. float32 stays
    f32, float64 (and Python floats) become f64, integers i64, str text."""
    records = [_encode(name, value) for name, value in arrays.items()]
    with open(path, "wb") as f:
        f.write(MAGIC)
        for r in records:
            f.write(r)


def _main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print("usage: python3 scripts/pldump.py FILE   (list the arrays of a dump)")
        return 0 if len(argv) == 2 else 2
    try:
        arrays = read(argv[1])
    except (OSError, DumpError) as e:
        print(f"pldump: cannot read {argv[1]}: {e}", file=sys.stderr)
        return 2
    for name, v in arrays.items():
        if isinstance(v, str):
            print(f"{name}  text  {v!r}")
        else:
            print(f"{name}  {v.dtype}  {v.shape}")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
