"""open_channel, TlsConfig and bearer: the one outgoing-call path of the package."""

from __future__ import annotations

import tempfile
import unittest
from pathlib import Path

import grpc

import _paths  # noqa: F401 - puts the package on sys.path

from contextd import CHANNEL_OPTIONS, TlsConfig, bearer, open_channel


class ChannelOptionsTest(unittest.TestCase):
    def test_the_same_options_as_the_typescript_client(self) -> None:
        # src/contract/client-call.ts CHANNEL_OPTIONS
        self.assertEqual(dict(CHANNEL_OPTIONS), {
            "grpc.max_receive_message_length": 64 * 1024 * 1024,
            "grpc.max_send_message_length": 64 * 1024 * 1024,
            "grpc.initial_reconnect_backoff_ms": 200,
            "grpc.max_reconnect_backoff_ms": 2000,
        })

    def test_open_channel(self) -> None:
        channel = open_channel("127.0.0.1:1", options=[("grpc.max_reconnect_backoff_ms", 500)])
        self.assertIsInstance(channel, grpc.Channel)
        channel.close()
        with open_channel("localhost:1", tls=TlsConfig()) as secure:
            self.assertIsInstance(secure, grpc.Channel)

    def test_an_empty_address_is_refused(self) -> None:
        for address in ("", "  "):
            with self.subTest(address=address), self.assertRaisesRegex(ValueError, "address is required"):
                open_channel(address)


class TlsConfigTest(unittest.TestCase):
    def test_a_client_certificate_needs_its_key(self) -> None:
        with self.assertRaisesRegex(ValueError, "cert_file and key_file go together"):
            TlsConfig(cert_file="client.crt")
        with self.assertRaisesRegex(ValueError, "cert_file and key_file go together"):
            TlsConfig(key_file="client.key")

    def test_a_missing_file_fails_when_the_channel_is_opened(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            tls = TlsConfig(ca_file=Path(tmp) / "no-such-ca.pem")
            with self.assertRaisesRegex(ValueError, r"TlsConfig\.ca_file: cannot read .*no-such-ca\.pem"):
                open_channel("127.0.0.1:1", tls=tls)

    def test_server_name_override_is_a_channel_option(self) -> None:
        self.assertEqual(TlsConfig(server_name_override="contextd.internal").channel_options(),
                         (("grpc.ssl_target_name_override", "contextd.internal"),))
        self.assertEqual(TlsConfig().channel_options(), ())


class BearerTest(unittest.TestCase):
    def test_bearer_metadata(self) -> None:
        self.assertEqual(bearer("s3cret-token_0=="), (("authorization", "Bearer s3cret-token_0=="),))
        self.assertEqual(bearer(None), ())
        self.assertEqual(bearer(""), ())

    def test_a_token_with_whitespace_is_refused_without_echoing_it(self) -> None:
        for token in ("s3cret\n", "s3 cret", "s3cret\t", "tök"):
            with self.subTest(token=token), self.assertRaises(ValueError) as caught:
                bearer(token)
            self.assertNotIn("s3", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
