use super::*;

fn connect(host: &str, port: u16) -> ProxyRequest {
    ProxyRequest::Connect {
        host: host.to_owned(),
        port,
    }
}

fn forward(host: &str, port: u16, head: &str) -> ProxyRequest {
    ProxyRequest::Forward {
        host: host.to_owned(),
        port,
        head: head.as_bytes().to_vec(),
    }
}

#[test]
fn head_end_finds_the_blank_line() {
    let cases: &[(&[u8], Option<usize>)] = &[
        (b"", None),
        (b"GET / HTTP/1.1\r\n", None),
        (b"GET / HTTP/1.1\r\n\r\n", Some(18)),
        (b"GET / HTTP/1.1\r\n\r\nbody", Some(18)),
    ];
    for (buf, want) in cases {
        assert_eq!(head_end(buf), *want, "{buf:?}");
    }
}

#[test]
fn parse_reads_connect_and_absolute_form() {
    let cases: &[(&str, Result<ProxyRequest, HeadError>)] = &[
        (
            "CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n",
            Ok(connect("pypi.org", 443)),
        ),
        (
            "CONNECT [::1]:8000 HTTP/1.0\r\n\r\n",
            Ok(connect("::1", 8000)),
        ),
        (
            "GET http://a.org/x?y=1 HTTP/1.1\r\nHost: a.org\r\nProxy-Connection: keep-alive\r\n\
             proxy-authorization: Basic eA==\r\nAccept: */*\r\nConnection: keep-alive\r\n\r\n",
            Ok(forward(
                "a.org",
                80,
                "GET /x?y=1 HTTP/1.1\r\nHost: a.org\r\nAccept: */*\r\nConnection: close\r\n\r\n",
            )),
        ),
        (
            "POST HTTP://a.org:8080 HTTP/1.0\r\n\r\n",
            Ok(forward(
                "a.org",
                8080,
                "POST / HTTP/1.0\r\nConnection: close\r\n\r\n",
            )),
        ),
        (
            "GET http://[::1]:81?q HTTP/1.1\r\n\r\n",
            Ok(forward(
                "::1",
                81,
                "GET /?q HTTP/1.1\r\nConnection: close\r\n\r\n",
            )),
        ),
        ("GET https://a.org/ HTTP/1.1\r\n\r\n", Err(HeadError::Https)),
        ("GET /x HTTP/1.1\r\n\r\n", Err(HeadError::NotAbsolute)),
        (
            "CONNECT pypi.org HTTP/1.1\r\n\r\n",
            Err(HeadError::ConnectTarget),
        ),
        (
            "CONNECT pypi.org:0 HTTP/1.1\r\n\r\n",
            Err(HeadError::ConnectTarget),
        ),
        (
            "CONNECT pypi.org:99999 HTTP/1.1\r\n\r\n",
            Err(HeadError::ConnectTarget),
        ),
        (
            "CONNECT a b:1 HTTP/1.1\r\n\r\n",
            Err(HeadError::RequestLine),
        ),
        ("GET http://a.org/ HTTP/2\r\n\r\n", Err(HeadError::Version)),
        (
            "GET http://u@a.org/ HTTP/1.1\r\n\r\n",
            Err(HeadError::Authority),
        ),
        ("GET http:///x HTTP/1.1\r\n\r\n", Err(HeadError::Authority)),
        (
            "GET http://a.org/ HTTP/1.1\r\nbad header\r\n\r\n",
            Err(HeadError::Header),
        ),
        ("\r\n\r\n", Err(HeadError::RequestLine)),
    ];
    for (head, want) in cases {
        assert_eq!(&parse(head.as_bytes()), want, "{head:?}");
    }
}

#[test]
fn parse_refuses_invalid_utf8() {
    assert_eq!(
        parse(b"GET http://a/\xff HTTP/1.1\r\n\r\n"),
        Err(HeadError::Encoding)
    );
}
