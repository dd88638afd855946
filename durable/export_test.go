package durable

// Exported for the tests of package durable_test, which may import ingest
// (ingest imports durable, so this package's own tests cannot).

// TestEngines are the real engines the write-path tests run on.
var TestEngines = engines

// TestConfig is the test log configuration in dir.
var TestConfig = testConfig

// ExecSQL runs a statement on a store, failing the test on error.
var ExecSQL = execSQL

// WaitFor polls a condition until it holds or a minute passes.
var WaitFor = waitFor

// SpanRows counts the spans table's rows.
var SpanRows = rows
