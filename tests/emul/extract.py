"""Pulls the device code that tests/emul/row16_emul.cc runs on the host, verbatim, into one
header: vec_keys.cuh's body (the vector key helpers) and, from finish_kernel.cuh, the row
ring (where the list reads through it) and list_row16.

usage: extract.py finish_kernel.cuh vec_keys.cuh out.inc"""
import sys


def between(text, start, end):
    a = text.index(start)
    return text[a:text.index(end, a)]


fk = open(sys.argv[1]).read()
vk = open(sys.argv[2]).read()
parts = ["namespace flyops::topk {\n", between(vk, "namespace flyops::topk {\n", "}  // namespace flyops::topk")
         .split("\n", 1)[1], "}  // namespace flyops::topk\n", "namespace flyops::topk::detail {\n"]
if "struct RowRing {" in fk:
    parts.append(between(fk, "struct RowRing {", "\n};\n") + "\n};\n")
parts.append(between(fk, "template <typename Keys, int kThreads>\n__noinline__ FLYOPS_DEVICE void list_row16",
                     "}  // namespace flyops::topk::detail"))
parts.append("}  // namespace flyops::topk::detail\n")
with open(sys.argv[3], "w") as f:
    f.write("".join(parts))
