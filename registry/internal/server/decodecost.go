package server

import (
	"fmt"
	"reflect"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// A request's bytes are scanned before they are decoded: what decoding would allocate
// (each message's Go struct, each string, each slice slot) is added up, and a request that
// would cost more than decodeFactor times its size plus decodeAllowance is refused without
// decoding it. A message on the wire can be two bytes (an empty endpoint) and a few
// hundred once decoded; counting such elements after decoding let a 10 MB request take
// 416 MiB. The allowance holds the largest honest request the per-cluster quotas admit
// (50,000 endpoints of a few hundred bytes each, decoded).
const (
	decodeFactor    = 10
	decodeAllowance = 16 << 20
	// maxDecodeDepth bounds how deep the scan follows nested messages (ours nest a few
	// levels; protobuf's own limit is 10,000).
	maxDecodeDepth = 64
)

// goSizes caches the size of each message's generated Go struct.
var goSizes sync.Map // protoreflect.FullName -> int

func goSize(md protoreflect.MessageDescriptor) int {
	if v, ok := goSizes.Load(md.FullName()); ok {
		return v.(int)
	}
	size := 64 // a message without a generated type (none of ours): a guess
	if mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName()); err == nil {
		size = int(reflect.TypeOf(mt.Zero().Interface()).Elem().Size())
	}
	goSizes.Store(md.FullName(), size)
	return size
}

// errTooCostly is what the scan reports when a request passes its budget.
type errTooCostly struct{ cost, size, budget int }

func (e errTooCostly) Error() string {
	return fmt.Sprintf("decoding the %d-byte request would allocate more than %d bytes (%d× its size + %d MiB); it holds too many small elements: send fewer endpoints or exports per request",
		e.size, e.budget, decodeFactor, decodeAllowance>>20)
}

// checkDecodeCost scans a request of message md and returns a RESOURCE_EXHAUSTED status
// when decoding it would cost more than its budget; nil otherwise (also for bytes that are
// not a valid message: the decoder reports those). It reads each byte once and allocates
// nothing.
func checkDecodeCost(md protoreflect.MessageDescriptor, b []byte) error {
	budget := decodeFactor*len(b) + decodeAllowance
	cost := goSize(md)
	if !scanCost(md, b, 0, &cost, budget) {
		return status.Error(codes.ResourceExhausted, errTooCostly{cost: cost, size: len(b), budget: budget}.Error())
	}
	return nil
}

// scanCost adds what decoding b as md allocates beyond md's own struct to *cost, and
// reports false as soon as *cost passes budget.
func scanCost(md protoreflect.MessageDescriptor, b []byte, depth int, cost *int, budget int) bool {
	if depth > maxDecodeDepth {
		return true
	}
	fields := md.Fields()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return true
		}
		b = b[n:]
		fd := fields.ByNumber(num)
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return true
			}
			b = b[n:]
			if fd != nil && fd.IsList() {
				*cost += 16 // a slice slot, doubled as the slice grows
			}
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return true
		}
		b = b[n:]
		switch {
		case fd == nil:
			*cost += len(v) // kept as unknown fields
		case fd.IsMap():
			// An entry: its key and value (strings here), and the map's share of a bucket.
			*cost += 64 + 2*len(v)
		case fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind:
			*cost += goSize(fd.Message())
			if fd.IsList() {
				*cost += 16
			}
			if *cost > budget || !scanCost(fd.Message(), v, depth+1, cost, budget) {
				return false
			}
		case fd.IsList() && fd.Kind() != protoreflect.StringKind && fd.Kind() != protoreflect.BytesKind:
			*cost += 16 * len(v) // packed scalars: at most one 8-byte value per byte, doubled
		default:
			*cost += len(v)
			if fd.IsList() {
				*cost += 32 // a string header in a slice, doubled
			}
		}
		if *cost > budget {
			return false
		}
	}
	return *cost <= budget
}
