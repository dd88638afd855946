package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/budgetd/budgetd/security"
)

// OTLP/gRPC's trace service, as in opentelemetry-proto's
// collector/trace/v1/trace_service.proto.
const (
	traceServiceName = "opentelemetry.proto.collector.trace.v1.TraceService"
	traceServiceFile = "opentelemetry/proto/collector/trace/v1/trace_service.proto"
)

// The gRPC service is registered by hand rather than with ptraceotlp's
// RegisterGRPCServer, which decodes the request inside gRPC's codec: gRPC
// reports any codec failure as INTERNAL, but OTLP wants INVALID_ARGUMENT
// for a malformed request (INTERNAL is also what a server bug looks like).
// Here gRPC hands over the raw message and the handler decodes it with
// pdata itself, so every outcome comes from the one table in export.go.

// traceService is the handler type of the service description.
type traceService interface {
	exportGRPC(ctx context.Context, dec func(any) error) (*rawMessage, error)
}

// traceServiceDesc describes TraceService/Export with a handler that takes
// the request as raw bytes.
func traceServiceDesc() *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: traceServiceName,
		HandlerType: (*traceService)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Export",
			Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				return srv.(traceService).exportGRPC(ctx, dec)
			},
		}},
		Metadata: traceServiceFile,
	}
}

// newGRPCServer builds the OTLP/gRPC server. Messages over
// max_recv_msg_bytes, compressed or after decompression, are refused by
// gRPC itself with RESOURCE_EXHAUSTED before they are fully read.
func (s *Server) newGRPCServer(opts ...grpc.ServerOption) *grpc.Server {
	srv := grpc.NewServer(append(opts,
		grpc.ForceServerCodecV2(rawCodec{fallback: encoding.GetCodecV2("proto")}),
		grpc.MaxRecvMsgSize(s.cfg.GRPC.MaxRecvMsgBytes),
		grpc.MaxConcurrentStreams(s.cfg.GRPC.MaxConcurrentStreams),
		grpc.ConnectionTimeout(s.cfg.GRPC.ConnectionTimeout),
		// A connection lives at most max_connection_age (plus a grace for
		// the requests in flight); the exporters reconnect at once. This
		// also bounds how long streams trickling a message can be held.
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionAge:      s.cfg.GRPC.MaxConnectionAge,
			MaxConnectionAgeGrace: s.cfg.GRPC.ConnectionTimeout + 30*time.Second,
		}),
		// Stop (Shutdown past its deadline) waits for handlers to
		// return, so none runs after Shutdown.
		grpc.WaitForHandlers(true),
		grpc.StatsHandler(&wireBytes{counter: s.m.requestBytes.WithLabelValues(transportGRPC, "wire"), streams: s.m.grpcStreams}),
	)...)
	srv.RegisterService(traceServiceDesc(), s)
	return srv
}

// exportGRPC is the OTLP/gRPC handler.
func (s *Server) exportGRPC(ctx context.Context, dec func(any) error) (*rawMessage, error) {
	start := time.Now()
	resp, o, err := s.exportGRPCRequest(ctx, dec)
	s.m.requestDuration.WithLabelValues(transportGRPC, o.String()).Observe(time.Since(start).Seconds())
	return resp, err
}

// exportGRPCRequest answers one request and returns its outcome.
func (s *Server) exportGRPCRequest(ctx context.Context, dec func(any) error) (*rawMessage, outcome, error) {
	if s.tokens != nil && !s.tokens.Check(authorization(ctx)) {
		return nil, outcomeUnauthenticated, s.grpcError(fail(outcomeUnauthenticated, security.ErrUnauthenticated))
	}
	// The message is received before a slot is taken, so a slow sender
	// holds a stream (ingest.grpc.max_concurrent_streams per connection)
	// but no slot, and for at most ingest.grpc.receive_timeout.
	in, err := s.receive(dec)
	if errors.Is(err, errReceiveTimeout) {
		s.m.receiveTimeouts.WithLabelValues(transportGRPC).Inc()
		return nil, outcomeCanceled, status.Error(codes.DeadlineExceeded, err.Error())
	}
	if err != nil {
		// gRPC read the message: RESOURCE_EXHAUSTED is its size limit;
		// CANCELED and DEADLINE_EXCEEDED mean the sender left; anything
		// else (INTERNAL) is data it could not decompress.
		st := status.Convert(err)
		o := outcomeMalformed
		switch st.Code() {
		case codes.ResourceExhausted:
			o = outcomeTooLarge
		case codes.Canceled, codes.DeadlineExceeded:
			o = outcomeCanceled
		}
		return nil, o, s.grpcError(fail(o, errors.New(st.Message())))
	}
	data := in.bytes()
	s.m.requestBytes.WithLabelValues(transportGRPC, "decoded").Add(float64(len(data)))
	charge := s.inflight.clamp(decodedSize(data))
	if !s.inflight.tryAcquire(charge) {
		in.free()
		return nil, outcomeOverloaded, s.grpcError(fail(outcomeOverloaded, errBudgetFull))
	}
	defer s.inflight.release(charge)
	if !s.acquire(s.grpcSlots) {
		in.free()
		return nil, outcomeOverloaded, s.grpcError(fail(outcomeOverloaded, errors.New("too many concurrent requests")))
	}
	defer s.release(s.grpcSlots)
	if err := s.admit(len(data), transportGRPC); err != nil {
		in.free()
		return nil, outcomeOverloaded, s.grpcError(err)
	}
	res, release, err := s.convertProto(data)
	if !s.reuseRequests {
		// The conversion copied what it keeps, so gRPC's buffer can go
		// back now.
		in.free()
	}
	if err != nil {
		release()
		in.free()
		return nil, outcomeMalformed, s.grpcError(fail(outcomeMalformed, fmt.Errorf("decode otlp/protobuf: %w", err)))
	}
	recordCharge := s.withRecord(charge, res.Spans) - charge
	if !s.inflight.tryAcquire(recordCharge) {
		release()
		in.free()
		return nil, outcomeOverloaded, s.grpcError(fail(outcomeOverloaded, errBudgetFull))
	}
	defer s.inflight.release(recordCharge)

	resp, o, err := s.export(ctx, res, transportGRPC)
	// Commit has copied the spans (or refused them): their memory, gRPC's
	// buffer included, can go to the next request.
	release()
	in.free()
	if err != nil {
		return nil, o, s.grpcError(fail(o, err))
	}
	out, err := resp.MarshalProto()
	if err != nil {
		return nil, o, status.Error(codes.Internal, "encode response: "+err.Error())
	}
	return &rawMessage{data: out}, o, nil
}

// errReceiveTimeout is a request whose message did not arrive within
// ingest.grpc.receive_timeout.
var errReceiveTimeout = errors.New("the request's message did not arrive within ingest.grpc.receive_timeout")

// receive reads the request's message, giving up after
// ingest.grpc.receive_timeout: grpc-go runs the handler before the message
// has arrived and sets no deadline of its own on receiving it. Giving up
// ends the stream, which ends the read still running (its buffer is freed
// when it returns).
func (s *Server) receive(dec func(any) error) (*rawMessage, error) {
	in := new(rawMessage)
	done := make(chan error, 1)
	go func() { done <- dec(in) }()
	timer := time.NewTimer(s.cfg.GRPC.ReceiveTimeout)
	defer timer.Stop()
	select {
	case err := <-done:
		return in, err
	case <-timer.C:
		go func() {
			if <-done == nil {
				in.free()
			}
		}()
		return nil, errReceiveTimeout
	}
}

// authorization returns the request's "authorization" metadata, as the
// OTLP exporters send a configured bearer token.
func authorization(ctx context.Context) string {
	if v := metadata.ValueFromIncomingContext(ctx, "authorization"); len(v) > 0 {
		return v[0]
	}
	return ""
}

// grpcError turns a failed request into its gRPC status, with a RetryInfo
// when the sender should retry: OTLP exporters honour its delay.
func (s *Server) grpcError(err error) error {
	o := outcomeOf(err)
	st := status.New(o.grpcCode(), senderMessage(o, err))
	if o.retryable() {
		if withRetry, derr := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(s.cfg.RetryAfter)}); derr == nil {
			st = withRetry
		}
	}
	return st.Err()
}

// rawMessage is a request or response as protobuf bytes. A received one
// holds a reference to gRPC's buffer until free.
type rawMessage struct {
	buf  mem.Buffer
	data []byte
}

func (m *rawMessage) bytes() []byte {
	if m.buf != nil {
		return m.buf.ReadOnlyData()
	}
	return m.data
}

func (m *rawMessage) free() {
	if m.buf != nil {
		m.buf.Free()
		m.buf = nil
	}
}

// rawCodec passes rawMessages through as bytes and leaves every other
// message to gRPC's proto codec. Its name is "proto" because that is the
// content subtype OTLP senders use.
type rawCodec struct {
	fallback encoding.CodecV2
}

func (c rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(*rawMessage); ok {
		return mem.BufferSlice{mem.SliceBuffer(m.bytes())}, nil
	}
	return c.fallback.Marshal(v)
}

func (c rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if m, ok := v.(*rawMessage); ok {
		// Takes a reference instead of copying when the message arrived
		// in one buffer.
		m.buf = data.MaterializeToBuffer(mem.DefaultBufferPool())
		return nil
	}
	return c.fallback.Unmarshal(data, v)
}

func (rawCodec) Name() string { return "proto" }

// wireBytes counts request bytes as received, before decompression; only
// gRPC's stats hooks see them.
type wireBytes struct {
	counter prometheus.Counter
	streams prometheus.Gauge // streams open now, a message being received included
}

func (w *wireBytes) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

func (w *wireBytes) HandleRPC(_ context.Context, st stats.RPCStats) {
	switch st := st.(type) {
	case *stats.InPayload:
		w.counter.Add(float64(st.CompressedLength))
	case *stats.Begin:
		w.streams.Inc()
	case *stats.End:
		w.streams.Dec()
	}
}

func (w *wireBytes) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (w *wireBytes) HandleConn(context.Context, stats.ConnStats) {}
