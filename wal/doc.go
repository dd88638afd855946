// Package wal is budgetd's write-ahead log: the durability point of ingest.
// An OTLP request is acknowledged once its spans are appended here and
// fsynced; a background drainer then reads the log in order, writes the
// spans to the store and, once the store has acknowledged them, lets the log
// drop the segments behind it. After a crash the drainer simply starts again
// from its checkpoint, so everything acknowledged reaches the store.
//
// Layout: a directory of segment files named by a 20-digit sequence number,
// each a run of records
//
//	uint32 little-endian payload length | uint32 CRC-32C of the payload | payload
//
// A torn or corrupt record (a crash mid-write, a bad disk block) fails its
// checksum; Open truncates the segment there, counts what it cut, and goes
// on — never a fatal error.
//
// Appends are group-committed: one goroutine writes every queued record and
// fsyncs once for all of them, so concurrent requests share the cost of a
// sync instead of queueing behind one each.
package wal
