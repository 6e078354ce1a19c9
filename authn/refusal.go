package authn

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// refusals are the last status each peer (by the address dialled) ended a
// stream of this process's with: a peer's guard names the limit or the
// check that refused what this process sent, and protoactor, which only
// says that the endpoint terminated, drops it.
var refusals sync.Map // address -> string

// recordRefusal wraps every stream this process dials.
func recordRefusal(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, err
	}
	return &recorded{ClientStream: cs, target: cc.Target()}, nil
}

type recorded struct {
	grpc.ClientStream
	target string
}

func (r *recorded) RecvMsg(m any) error {
	err := r.ClientStream.RecvMsg(m)
	if err != nil {
		switch status.Code(err) {
		case codes.ResourceExhausted, codes.InvalidArgument, codes.Unimplemented, codes.PermissionDenied, codes.Internal:
			refusals.Store(r.target, status.Convert(err).Message())
		}
	}
	return err
}

// LastRefusal is what the peer at addr last refused a stream of this
// process's with ("" if none).
func LastRefusal(addr string) string {
	if v, ok := refusals.Load(addr); ok {
		return v.(string)
	}
	return ""
}

// Refusal dials addr once and reads what it says first, within timeout:
// the line a server over its connection limits sends before it closes
// (RefusalPrefix), without the prefix; "" when it says anything else,
// nothing, or cannot be reached.
func Refusal(addr string, timeout time.Duration) string {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return ""
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 512)
	n := 0
	for n < len(buf) {
		k, err := c.Read(buf[n:])
		n += k
		if err != nil || bytes.IndexByte(buf[:n], '\n') >= 0 || !bytes.HasPrefix([]byte(RefusalPrefix), buf[:min(n, len(RefusalPrefix))]) {
			break
		}
	}
	line, ok := strings.CutPrefix(string(buf[:n]), RefusalPrefix)
	if !ok {
		return ""
	}
	return strings.TrimSpace(line)
}
