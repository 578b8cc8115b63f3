use super::*;

const KEY: [u8; KEY_LEN] = [7; KEY_LEN];

fn cipher() -> Cipher {
    Cipher::new(&KEY).expect("key")
}

#[test]
fn a_sealed_value_opens_as_itself() {
    let c = cipher();
    let big = vec![0xffu8; 70_000];
    let values: [&[u8]; 4] = [b"", b"x", b"pypi-AgEIcHlwaS5vcmc", &big];
    for value in values {
        let sealed = c.seal("u1", "PIP_TOKEN", value).expect("seal");
        assert_eq!(sealed.nonce.len(), NONCE_LEN);
        assert_eq!(c.open("u1", "PIP_TOKEN", &sealed).expect("open"), value);
    }
}

#[test]
fn the_ciphertext_does_not_hold_the_plaintext_and_nonces_differ() {
    let c = cipher();
    let value = b"pypi-AgEIcHlwaS5vcmc-very-secret";
    let a = c.seal("u1", "PIP_TOKEN", value).expect("seal");
    let b = c.seal("u1", "PIP_TOKEN", value).expect("seal");
    assert_ne!(a.nonce, b.nonce);
    assert_ne!(a.ciphertext, b.ciphertext);
    let found = a
        .ciphertext
        .windows(8)
        .any(|w| value.windows(8).any(|v| v == w));
    assert!(!found, "plaintext leaked into the ciphertext");
}

#[test]
fn a_value_opens_only_for_its_owner_and_name() {
    let c = cipher();
    let sealed = c.seal("u1", "PIP_TOKEN", b"v").expect("seal");
    let cases = [
        ("u2", "PIP_TOKEN"),
        ("u1", "NPM_TOKEN"),
        ("u1\0PIP", "TOKEN"),
        ("u1", "PIP_TOKEN\0"),
        ("", "u1\0PIP_TOKEN"),
    ];
    for (owner, name) in cases {
        let opened = c.open(owner, name, &sealed);
        assert!(
            matches!(opened, Err(CipherError::Open)),
            "{owner:?} {name:?}"
        );
    }
}

#[test]
fn any_altered_byte_is_refused() {
    let c = cipher();
    let sealed = c.seal("u1", "PIP_TOKEN", b"value").expect("seal");
    for i in 0..sealed.ciphertext.len() {
        let mut bad = sealed.clone();
        bad.ciphertext[i] ^= 1;
        assert!(
            c.open("u1", "PIP_TOKEN", &bad).is_err(),
            "ciphertext byte {i}"
        );
    }
    for i in 0..sealed.nonce.len() {
        let mut bad = sealed.clone();
        bad.nonce[i] ^= 1;
        assert!(c.open("u1", "PIP_TOKEN", &bad).is_err(), "nonce byte {i}");
    }
    let mut short = sealed.clone();
    short.ciphertext.truncate(4);
    assert!(c.open("u1", "PIP_TOKEN", &short).is_err());
    let mut no_nonce = sealed;
    no_nonce.nonce.clear();
    assert!(c.open("u1", "PIP_TOKEN", &no_nonce).is_err());
}

#[test]
fn another_key_does_not_open_it_and_keys_must_be_32_bytes() {
    let sealed = cipher().seal("u1", "A", b"v").expect("seal");
    let other = Cipher::new(&[8; KEY_LEN]).expect("key");
    assert!(matches!(
        other.open("u1", "A", &sealed),
        Err(CipherError::Open)
    ));
    for len in [0, 16, 31, 33, 64] {
        assert!(
            matches!(Cipher::new(&vec![1; len]), Err(CipherError::BadKey)),
            "{len}"
        );
    }
    assert_eq!(format!("{:?}", cipher()), "Cipher(<key>)");
}
