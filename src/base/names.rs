//! Keys and ids as shared memory holds them: fixed arrays of the longest a
//! name may be, with their length.

/// The longest key or id, in bytes (`input::name` refuses longer ones).
pub const MAX_NAME_BYTES: usize = 255;

#[derive(Clone, Copy)]
#[repr(C)]
pub struct Name {
    len: u16,
    bytes: [u8; MAX_NAME_BYTES],
}

impl Name {
    pub const EMPTY: Name = Name {
        len: 0,
        bytes: [0; MAX_NAME_BYTES],
    };

    /// None when longer than a name may be (checked on input already).
    pub fn new(name: &[u8]) -> Option<Name> {
        let mut n = Name::EMPTY;
        n.bytes.get_mut(..name.len())?.copy_from_slice(name);
        n.len = name.len() as u16;
        Some(n)
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(self.as_bytes()).into_owned()
    }
}
