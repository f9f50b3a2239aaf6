// Package jsonerr turns encoding/json's decoding errors into sentences a
// client can act on, for the wire packages' request parsers.
package jsonerr

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// Type rewrites a *json.UnmarshalTypeError as "field: expected T, got V",
// with T in JSON's words (object, array, string, integer, number,
// boolean); other errors are returned as they are.
func Type(err error) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) || te.Type == nil {
		return err
	}
	if te.Field != "" {
		return fmt.Errorf("%s: expected %s, got %s", te.Field, Name(te.Type), te.Value)
	}
	return fmt.Errorf("expected %s, got %s", Name(te.Type), te.Value)
}

// Name is JSON's word for the values that decode into t.
func Name(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Interface:
		return "JSON value"
	}
	return t.String()
}
