// Package plain tells whether a JSON object, as decoded into a map, is
// already what decoding it into a Kubernetes Go type and converting that
// back to a map would give: every member a field of the type, every value
// of the field's type and written back unchanged. The registry uses it to
// skip that round trip (a strict decode by reflection and the unstructured
// converter) for request bodies, merge patches and custom resources'
// metadata, leaving everything it does not vouch for to the round trip.
//
// It also makes such a map straight from a value of the Go type (Map), as
// writing the value as JSON and decoding that would: a protobuf request
// body, decoded into its Go type, becomes the object's map without JSON.
package plain
