// Package durable is ingest's durability point backed by the write-ahead log
// (package wal): Commit appends a request's spans to the log and returns once
// they are fsynced, so the OTLP response can be sent; a drainer goroutine
// reads the log in order, writes the spans to the store in batches, hands
// them to the analysis, and lets the log drop what the store acknowledged.
//
// Exactly once: before writing a batch the drainer records in its
// checkpoint which records the batch holds; the batch's dedup token is
// derived from that range. After a crash the drainer rebuilds exactly that
// batch from the log and writes it again under the same token, so a batch
// that had landed before the crash is not stored twice (on servers with
// insert_deduplication_token; see store.Store for older ones).
package durable
