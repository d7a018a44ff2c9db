package imports

import (
	"sync"
	"weak"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	registryv1 "github.com/ai-dynamo/global-discovery-mcs/api/gen/go/globaldiscoverymcs/registry/v1"
)

// Message is one watch response, shared by every watcher it is the same for (the same
// revisions and filter): a reconnect storm or a hundred watchers following one change
// build it once, and encode it once per wire format. Do not change it.
type Message struct {
	*registryv1.WatchImportsResponse

	protoOnce sync.Once
	protoData []byte
	protoErr  error
	jsonOnce  sync.Once
	jsonData  []byte
	jsonErr   error
}

// EncodedProto returns the message in the protobuf wire format, encoded once.
func (m *Message) EncodedProto() ([]byte, error) {
	m.protoOnce.Do(func() { m.protoData, m.protoErr = proto.Marshal(m.WatchImportsResponse) })
	return m.protoData, m.protoErr
}

// EncodedJSON returns the message as JSON, encoded once (with the options of the first call).
func (m *Message) EncodedJSON(opts protojson.MarshalOptions) ([]byte, error) {
	m.jsonOnce.Do(func() { m.jsonData, m.jsonErr = opts.Marshal(m.WatchImportsResponse) })
	return m.jsonData, m.jsonErr
}

// messageKey says what a watch response holds: the changes after from (-1: a snapshot) up
// to revision to, through a filter.
type messageKey struct {
	from, to int64
	filter   Filter
	// pageSize and page name one page of a snapshot sent in pages.
	pageSize, page int
}

// sharedMessages holds the messages of one revision weakly: a message lives as long as a
// watcher still sends it, and the next revision forgets them all.
type sharedMessages struct {
	rev int64
	m   map[messageKey]weak.Pointer[Message]
}

// getLocked returns the message for k, building it when no watcher holds one; nil when
// build returns nil. The caller holds the set's lock.
func (sm *sharedMessages) getLocked(k messageKey, build func() *registryv1.WatchImportsResponse) *Message {
	if k.to < sm.rev {
		// A page of an older snapshot, for a watcher still paging through it: nobody at the
		// current revision shares it.
		if resp := build(); resp != nil {
			return &Message{WatchImportsResponse: resp}
		}
		return nil
	}
	if sm.m == nil || sm.rev != k.to {
		sm.m, sm.rev = map[messageKey]weak.Pointer[Message]{}, k.to
	}
	if p, ok := sm.m[k]; ok {
		if msg := p.Value(); msg != nil {
			return msg
		}
	}
	resp := build()
	if resp == nil {
		return nil
	}
	msg := &Message{WatchImportsResponse: resp}
	sm.m[k] = weak.Make(msg)
	return msg
}
