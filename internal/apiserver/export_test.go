package apiserver

// SetProtoKeptMax gives the protobuf messages kept with records a budget
// of max bytes, counted afresh, until restore is called.
func SetProtoKeptMax(max int64) (restore func()) {
	old := protoKept
	protoKept = &keptBytes{max: max}
	return func() { protoKept = old }
}

// ProtoKeptBytes is the bytes of protobuf messages kept with records.
func ProtoKeptBytes() int64 { return protoKept.n.Load() }
