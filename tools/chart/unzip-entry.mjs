#!/usr/bin/env node
// Extracts one entry from a zip archive with node's zlib only: the fallback fetch-helm.sh uses
// where no `unzip` is installed. Supports stored and deflated entries and zip64 sizes/offsets.
// Usage: node unzip-entry.mjs <archive.zip> <entry/path> <out-file>
import { openSync, readSync, fstatSync, writeFileSync, closeSync } from "node:fs";
import { inflateRawSync } from "node:zlib";

function readAt(fd, position, length) {
  const buf = Buffer.alloc(length);
  let done = 0;
  while (done < length) {
    const n = readSync(fd, buf, done, length - done, position + done);
    if (n === 0) throw new Error(`unexpected end of archive at ${position + done}`);
    done += n;
  }
  return buf;
}

export function extractEntry(archive, entryName) {
  const fd = openSync(archive, "r");
  try {
    const size = fstatSync(fd).size;
    const tailLen = Math.min(size, 22 + 0xffff);
    const tail = readAt(fd, size - tailLen, tailLen);
    const eocd = tail.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
    if (eocd < 0) throw new Error("not a zip archive (no end of central directory)");
    let count = tail.readUInt16LE(eocd + 10);
    let cdSize = tail.readUInt32LE(eocd + 12);
    let cdOffset = tail.readUInt32LE(eocd + 16);
    const loc64 = eocd - 20;
    if (loc64 >= 0 && tail.readUInt32LE(loc64) === 0x07064b50) {
      const rec = readAt(fd, Number(tail.readBigUInt64LE(loc64 + 8)), 56);
      count = Number(rec.readBigUInt64LE(32));
      cdSize = Number(rec.readBigUInt64LE(40));
      cdOffset = Number(rec.readBigUInt64LE(48));
    }
    const cd = readAt(fd, cdOffset, cdSize);
    let p = 0;
    for (let i = 0; i < count; i++) {
      if (cd.readUInt32LE(p) !== 0x02014b50) throw new Error("corrupt central directory");
      const method = cd.readUInt16LE(p + 10);
      let compSize = cd.readUInt32LE(p + 20);
      let rawSize = cd.readUInt32LE(p + 24);
      const nameLen = cd.readUInt16LE(p + 28);
      const extraLen = cd.readUInt16LE(p + 30);
      const commentLen = cd.readUInt16LE(p + 32);
      let localOffset = cd.readUInt32LE(p + 42);
      const name = cd.toString("utf8", p + 46, p + 46 + nameLen);
      if (name === entryName) {
        // zip64 extended information extra field (id 0x0001) carries the real values.
        let e = p + 46 + nameLen;
        const end = e + extraLen;
        while (e + 4 <= end) {
          const id = cd.readUInt16LE(e);
          const len = cd.readUInt16LE(e + 2);
          if (id === 0x0001) {
            let q = e + 4;
            if (rawSize === 0xffffffff) {
              rawSize = Number(cd.readBigUInt64LE(q));
              q += 8;
            }
            if (compSize === 0xffffffff) {
              compSize = Number(cd.readBigUInt64LE(q));
              q += 8;
            }
            if (localOffset === 0xffffffff) {
              localOffset = Number(cd.readBigUInt64LE(q));
              q += 8;
            }
          }
          e += 4 + len;
        }
        const local = readAt(fd, localOffset, 30);
        if (local.readUInt32LE(0) !== 0x04034b50) throw new Error("corrupt local header");
        const dataStart = localOffset + 30 + local.readUInt16LE(26) + local.readUInt16LE(28);
        const data = readAt(fd, dataStart, compSize);
        if (method === 0) return data;
        if (method === 8) {
          const out = inflateRawSync(data);
          if (out.length !== rawSize) throw new Error(`size mismatch for ${entryName}`);
          return out;
        }
        throw new Error(`unsupported compression method ${method} for ${entryName}`);
      }
      p += 46 + nameLen + extraLen + commentLen;
    }
    throw new Error(`${entryName} not found in ${archive}`);
  } finally {
    closeSync(fd);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [archive, entry, out] = process.argv.slice(2);
  if (!archive || !entry || !out) {
    console.error("usage: node unzip-entry.mjs <archive.zip> <entry> <out-file>");
    process.exit(2);
  }
  writeFileSync(out, extractEntry(archive, entry), { mode: 0o755 });
}
