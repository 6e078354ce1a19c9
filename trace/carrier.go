package trace

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/propagation"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// Carrier is a span context in an actor message: protoactor messages carry
// no context.Context, so the sender puts the Carrier of its current span in
// the message and the receiver starts its span under Carrier.Context. It is a
// small value with no pointers to the sender's state; the zero Carrier
// carries nothing (spans started under it are roots).
//
//	// submission actor, inside host_orch:
//	rec.Tell(&RecordRequest{Key: k, Trace: orch.Carrier()})
//	// recorder actor:
//	ctx, rs := tr.StartRecord(msg.Trace.Context(context.Background()), info)
//
// For messages that cross a process, a Carrier marshals as text to the W3C
// traceparent header value.
type Carrier struct {
	sc oteltrace.SpanContext
}

// Inject captures the span context in ctx.
func Inject(ctx context.Context) Carrier {
	return Carrier{sc: oteltrace.SpanContextFromContext(ctx)}
}

// Context returns ctx with the carried span as the parent of spans started
// under it. A zero Carrier returns ctx unchanged.
func (c Carrier) Context(ctx context.Context) context.Context {
	if !c.sc.IsValid() {
		return ctx
	}
	return oteltrace.ContextWithSpanContext(ctx, c.sc)
}

// IsValid reports whether the Carrier carries a span (a no-op provider's
// spans carry their parent's, so under a no-op root this is false).
func (c Carrier) IsValid() bool { return c.sc.IsValid() }

// SpanContext is the carried OpenTelemetry span context.
func (c Carrier) SpanContext() oteltrace.SpanContext { return c.sc }

// String is the W3C traceparent value, or "" for a zero Carrier.
func (c Carrier) String() string {
	if !c.sc.IsValid() {
		return ""
	}
	m := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(oteltrace.ContextWithSpanContext(context.Background(), c.sc), m)
	return m.Get("traceparent")
}

// MarshalText encodes the Carrier as a W3C traceparent value ("" when
// zero).
func (c Carrier) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText decodes a W3C traceparent value; "" gives the zero Carrier.
// The span context it yields is marked remote.
func (c *Carrier) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*c = Carrier{}
		return nil
	}
	m := propagation.MapCarrier{"traceparent": string(b)}
	sc := oteltrace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), m))
	if !sc.IsValid() {
		return fmt.Errorf("trace: %q is not a W3C traceparent", b)
	}
	*c = Carrier{sc: sc}
	return nil
}
