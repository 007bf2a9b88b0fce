//! The leader value (contract 11): a `jsonb` argument or column, handled as
//! its canonical text.
//!
//! pgrx's own `JsonB` goes through `serde_json::Value`, which rounds large
//! or very precise numbers. A leader value is the leader's to say, so it is
//! kept exactly: read with `jsonb_out`, written back with `jsonb_in` (in
//! SQL, a `$n::jsonb` cast of text), and put into payloads as raw JSON.

use pgrx::callconv::{Arg, ArgAbi};
use pgrx::nullable::Nullable;
use pgrx::prelude::*;
use std::ffi::CStr;

/// Longest value, in bytes of its text form.
pub const MAX_VALUE_BYTES: usize = 2000;

/// A `jsonb` datum as its text (`jsonb_out`'s canonical form).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonbText(pub String);

impl FromDatum for JsonbText {
    unsafe fn from_polymorphic_datum(
        datum: pg_sys::Datum,
        is_null: bool,
        _: pg_sys::Oid,
    ) -> Option<Self> {
        if is_null {
            return None;
        }
        unsafe {
            let text: &CStr = pgrx::fcinfo::direct_function_call(pg_sys::jsonb_out, &[Some(datum)])
                .expect("jsonb_out returns a string");
            let value = text.to_string_lossy().into_owned();
            pg_sys::pfree(text.as_ptr().cast_mut().cast());
            Some(JsonbText(value))
        }
    }
}

impl IntoDatum for JsonbText {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        let text = std::ffi::CString::new(self.0).expect("jsonb text holds no NUL byte");
        unsafe {
            pgrx::fcinfo::direct_function_call_as_datum(
                pg_sys::jsonb_in,
                &[Some(pg_sys::Datum::from(text.as_ptr()))],
            )
        }
    }

    fn type_oid() -> pg_sys::Oid {
        pg_sys::JSONBOID
    }
}

unsafe impl<'fcx> ArgAbi<'fcx> for JsonbText {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        let index = arg.index();
        unsafe { arg.unbox_arg_using_from_datum() }
            .unwrap_or_else(|| panic!("argument {index} must not be null"))
    }

    unsafe fn unbox_nullable_arg(arg: Arg<'_, 'fcx>) -> Nullable<Self> {
        unsafe { arg.unbox_arg_using_from_datum() }.into()
    }
}

pgrx::impl_sql_translatable!(JsonbText, "jsonb");
