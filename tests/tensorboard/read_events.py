#!/usr/bin/env python3
"""Reads TensorBoard event files back, independently of ScaleLab's writer (tst_tensorboard).

The framing is checked here with `struct` and a CRC-32C of this file's own, and the records
are parsed with classes that `protoc --python_out` generates, into a temporary folder, from
the .proto files of proto/tensorboard (TensorBoard's own field numbers and names). Fails
(exit 1, the reason on standard error) on any torn record, wrong length, wrong CRC (of the
length or of the data), an unparsable Event, a file whose first event is not file_version
"brain.Event:2", or hparams plugin data that is not version 0. Prints, as JSON on standard
output, every run folder's scalars (tag -> [[step, value, wall_time], ...]), texts, hparams
summaries and SessionLog START steps.

    read_events.py --proto-root REPO/proto LOGDIR

Needs python3 and python3-protobuf (Debian), and protoc ($PROTOC, else on PATH).
"""

import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

PROTOS = [
    "tensorboard/compat/proto/types.proto",
    "tensorboard/compat/proto/tensor_shape.proto",
    "tensorboard/compat/proto/tensor.proto",
    "tensorboard/compat/proto/summary.proto",
    "tensorboard/compat/proto/event.proto",
    "tensorboard/plugins/hparams/api.proto",
    "tensorboard/plugins/hparams/plugin_data.proto",
]


class Broken(Exception):
    pass


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = (c >> 8) ^ _TABLE[(c ^ b) & 0xFF]
    return c ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    """The data of each record of `path`, every length and CRC checked."""
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        if len(data) - pos < 12:
            raise Broken("%s: a torn record header at byte %d" % (path, pos))
        header = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        if masked(crc32c(header)) != length_crc:
            raise Broken("%s: the length's CRC of the record at byte %d is wrong" % (path, pos))
        start = pos + 12
        end = start + length
        if end + 4 > len(data):
            raise Broken("%s: the record at byte %d runs past the end of the file" % (path, pos))
        body = data[start:end]
        (data_crc,) = struct.unpack("<I", data[end:end + 4])
        if masked(crc32c(body)) != data_crc:
            raise Broken("%s: the data's CRC of the record at byte %d is wrong" % (path, pos))
        yield body
        pos = end + 4


def generate(proto_root, out):
    """Python classes for the protos, in `out` (made a package tree, so that a TensorBoard
    installed on the machine is not imported instead)."""
    protoc = os.environ.get("PROTOC", "protoc")
    # google/protobuf/struct.proto (the hparams values) comes with protobuf's headers.
    includes = [d for d in ("/usr/include", "/usr/local/include")
                if os.path.exists(os.path.join(d, "google/protobuf/struct.proto"))]
    command = [protoc, "--proto_path=" + proto_root] + ["--proto_path=" + d for d in includes] + [
        "--python_out=" + out] + [os.path.join(proto_root, p) for p in PROTOS]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise Broken("protoc failed: %s" % result.stderr.strip())
    for folder, _, _ in os.walk(out):
        if folder != out:
            open(os.path.join(folder, "__init__.py"), "a").close()
    sys.path.insert(0, out)


def finite(v):
    """JSON has no NaN: non-finite values as text."""
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def read(logdir):
    from google.protobuf import json_format
    from tensorboard.compat.proto import event_pb2
    from tensorboard.compat.proto import types_pb2
    from tensorboard.plugins.hparams import plugin_data_pb2

    runs = {}
    total = 0
    for folder, _, files in sorted(os.walk(logdir)):
        for name in sorted(files):
            if "tfevents" not in name:
                continue
            path = os.path.join(folder, name)
            run = os.path.relpath(folder, logdir)
            entry = runs.setdefault(run, {"files": [], "scalars": {}, "texts": {}, "hparams": {}, "restarts": []})
            entry["files"].append(name)
            first = True
            for body in records(path):
                total += 1
                event = event_pb2.Event()
                try:
                    event.ParseFromString(body)
                except Exception as e:  # a record whose CRC holds but whose bytes are no Event
                    raise Broken("%s: a record is not an Event: %s" % (path, e))
                what = event.WhichOneof("what")
                if first:
                    if what != "file_version" or event.file_version != "brain.Event:2":
                        raise Broken("%s: the first event is not file_version \"brain.Event:2\" (%s)" % (path, event))
                    entry["writer"] = event.source_metadata.writer
                    first = False
                    continue
                if event.wall_time <= 0:
                    raise Broken("%s: an event without a wall time: %s" % (path, event))
                if what == "session_log":
                    if event.session_log.status == event_pb2.SessionLog.START:
                        entry["restarts"].append(event.step)
                    continue
                if what != "summary":
                    raise Broken("%s: an event of kind %s" % (path, what))
                for value in event.summary.value:
                    kind = value.WhichOneof("value")
                    plugin = value.metadata.plugin_data.plugin_name
                    if kind == "simple_value":
                        entry["scalars"].setdefault(value.tag, []).append(
                            [event.step, finite(value.simple_value), event.wall_time])
                        if value.metadata.summary_description:
                            entry.setdefault("descriptions", {})[value.tag] = value.metadata.summary_description
                    elif plugin == "text":
                        if value.tensor.dtype != types_pb2.DT_STRING:
                            raise Broken("%s: text %s is not a string tensor" % (path, value.tag))
                        entry["texts"].setdefault(value.tag, []).append(value.tensor.string_val[0].decode("utf-8"))
                    elif plugin == "hparams":
                        data = plugin_data_pb2.HParamsPluginData()
                        data.ParseFromString(value.metadata.plugin_data.content)
                        if data.version != 0:
                            raise Broken("%s: hparams plugin data of version %d" % (path, data.version))
                        which = data.WhichOneof("data")
                        entry["hparams"][which] = json_format.MessageToDict(
                            getattr(data, which), preserving_proto_field_name=True)
                        entry["hparams"][which + "_tag"] = value.tag
                    else:
                        raise Broken("%s: a value of tag %s that is neither a scalar, text nor hparams" % (path, value.tag))
            if first:
                raise Broken("%s: an empty event file" % path)
    return {"records": total, "runs": runs}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proto-root", required=True, help="the repository's proto/ folder")
    parser.add_argument("logdir")
    args = parser.parse_args()
    try:
        with tempfile.TemporaryDirectory(prefix="tensorboard-protos-") as out:
            generate(args.proto_root, out)
            result = read(args.logdir)
    except Broken as e:
        print("read_events.py: %s" % e, file=sys.stderr)
        return 1
    json.dump(result, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
