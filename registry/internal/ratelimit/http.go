package ratelimit

import (
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
)

// HTTP admits each REST request at the door as Tap does a gRPC call, before its body is
// read: a client in debt gets 429 with Retry-After and the status as the gateway writes
// errors (its RetryInfo included). The body's bytes are charged once the request is done.
func (l *Limiter) HTTP(next http.Handler, clientOf func(*http.Request) string) http.Handler {
	if !l.Enabled() {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		client := clientOf(r)
		if wait, ok := l.Admit(client); !ok {
			l.refuseHTTP(w, client, l.DelayRefusal(r.Context(), client, wait))
			return
		}
		body := &countingBody{ReadCloser: r.Body}
		r.Body = body
		defer func() { l.ChargeBytes(client, body.n) }()
		next.ServeHTTP(w, r)
	})
}

func (l *Limiter) refuseHTTP(w http.ResponseWriter, client string, wait time.Duration) {
	doc, err := protojson.Marshal(l.Status(client, wait).Proto())
	if err != nil {
		doc = []byte(`{"code":8}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write(doc)
}

// countingBody counts the bytes read of a request body.
type countingBody struct {
	io.ReadCloser
	n int
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += n
	return n, err
}
