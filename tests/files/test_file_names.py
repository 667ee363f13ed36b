"""An attached file's name (RUN-13, docs/web.md): what the person typed, minus the
characters that hide or disguise it, ending with an extension of what the bytes are — the
one name the model, the chat, the console and every download see."""
from __future__ import annotations

import pytest

from sessions.models import SessionFile, SessionMessage
from sessions.services.files import NAME_MAX, file_name_clean, file_store
from tests.files.makers import make_pdf, make_png
from tests.files.test_attachments import ask, client_of, upload
from tests.security.conftest import assert_error_shape

TEXT = {"kind": "text", "content_type": "text/plain"}
PNG = {"kind": "image", "content_type": "image/png"}
JPEG = {"kind": "image", "content_type": "image/jpeg"}
PDF = {"kind": "pdf", "content_type": "application/pdf"}


@pytest.mark.parametrize("name, sniffed, cleaned", [
    ("invoice\u202etxt.hta", TEXT, "invoicetxt.hta.txt"),  # shown as "invoiceath.txt", would run on Windows
    ("report\u2066\u2069\u200b\u200e\ufeff.md", TEXT, "report.md"),  # isolates, zero-width, mark, BOM (all Cf)
    ("line\u2028break\u2029.log", TEXT, "linebreak.log"),
    ("c1\x85\x9b\x9fcontrols\x00\x1b\x7f.csv", TEXT, "c1controls.csv"),
    ("\x00\x01\x1f\x7f\x85\u202e\u2028", TEXT, "file.txt"),  # nothing left: a name that says its kind
    ("", PDF, "file.pdf"),
    ("C:\\Users\\me\\notes.TXT", TEXT, "notes.TXT"),
    ("../../etc/app.yaml", TEXT, "app.yaml"),
    ("script.py", TEXT, "script.py.txt"),  # a double-click runs these
    ("app.js", TEXT, "app.js.txt"),
    ("run.sh", TEXT, "run.sh.txt"),
    ("page.html", TEXT, "page.html.txt"),  # a browser would render these from disk
    ("logo.svg", TEXT, "logo.svg.txt"),
    ("feed.xml", TEXT, "feed.xml.txt"),
    ("main.go", TEXT, "main.go"),
    (".bashrc", TEXT, ".bashrc.txt"),
    ("README", TEXT, "README.txt"),
    ("trailing.hta. . ", TEXT, "trailing.hta.txt"),  # Windows would drop the dots and spaces
    ("notes.txt", PNG, "notes.txt.png"),
    ("photo.png", PNG, "photo.png"),
    ("photo.JPG", JPEG, "photo.JPG"),
    ("photo.jpeg", JPEG, "photo.jpeg"),
    ("photo.png", JPEG, "photo.png.jpg"),
    ("tool.exe", PNG, "tool.exe.png"),
    ("contract.pdf", PDF, "contract.pdf"),
    ("contract.hta", PDF, "contract.hta.pdf"),
    ("caf\ufffd.txt", TEXT, "caf\ufffd.txt"),
    ("日本語のメモ.md", TEXT, "日本語のメモ.md"),
])
def test_a_name_loses_hiding_characters_and_ends_with_what_the_bytes_are(name, sniffed, cleaned):
    assert file_name_clean(name, **sniffed) == cleaned
    assert file_name_clean(cleaned, **sniffed) == cleaned  # the same when cleaned again (older rows)


@pytest.mark.parametrize("name, sniffed, ending", [
    ("x" * 1000 + ".log", TEXT, "x.log"),
    ("x" * 1000 + ".hta", TEXT, "x.txt"),
    ("x" * 1000, PNG, "x.png"),
    ("a." + "b" * 1000, TEXT, "b.txt"),
])
def test_a_long_name_is_cut_to_the_column_keeping_its_extension(name, sniffed, ending):
    cleaned = file_name_clean(name, **sniffed)
    assert len(cleaned) == NAME_MAX and cleaned.endswith(ending)
    assert file_name_clean(cleaned, **sniffed) == cleaned


@pytest.mark.django_db
def test_the_model_the_record_and_the_download_see_the_cleaned_name(alice, make_session):
    session = make_session(alice)
    client = client_of(alice)
    answer = upload(client, session.pk, "invoice\u202etxt.hta", b"Pay 100 EUR to the account below.\n").json()
    assert (answer["name"], answer["content_type"]) == ("invoicetxt.hta.txt", "text/plain")
    assert SessionFile.objects.get().name == "invoicetxt.hta.txt"
    download = client.get(answer["url"])
    assert download["Content-Disposition"] == 'attachment; filename="invoicetxt.hta.txt"'
    assert ask(client, session.pk, "Is this real?", [answer["id"]]).status_code == 202
    record = SessionMessage.objects.get(session=session, kind="user").message
    assert record["attachments"][0]["name"] == "invoicetxt.hta.txt"


@pytest.mark.django_db
def test_an_image_and_a_pdf_are_named_by_their_type(alice, make_session):
    session = make_session(alice)
    client = client_of(alice)
    assert upload(client, session.pk, "invoice\u202egnp.exe", make_png(2, 2)).json()["name"] == "invoicegnp.exe.png"
    assert upload(client, session.pk, "scan.hta", make_pdf(["total 42"])).json()["name"] == "scan.hta.pdf"


@pytest.mark.django_db
def test_a_thousand_character_name_is_stored_cut_with_its_extension(alice, make_session):
    session = make_session(alice)
    long = upload(client_of(alice), session.pk, "n" * 1000 + ".md", b"# notes\n").json()
    assert len(long["name"]) <= NAME_MAX and long["name"].endswith("n.md")
    assert SessionFile.objects.get().name == long["name"]


@pytest.mark.django_db
def test_a_name_of_control_characters_only(alice, make_session):
    session = make_session(alice)
    # Through the API the multipart parser drops them first and sees no file: a 400 naming it.
    response = upload(client_of(alice), session.pk, "\x01\x02\x85\u202e\u2028", b"just words\n")
    assert "file" in assert_error_shape(response, 400)["fields"]
    assert not SessionFile.objects.exists()
    # The service names such a file by its kind.
    stored = file_store(session=session, user=alice, name="\x01\x02\x85\u202e\u2028", data=b"just words\n")
    assert stored.name == "file.txt"


@pytest.mark.django_db
def test_the_service_cleans_a_name_the_multipart_parser_did_not_see(alice, make_session):
    stored = file_store(session=make_session(alice), user=alice, name="invoice\u202etxt\u2029.hta" + "x" * 1000,
                        data=b"Pay 100 EUR.\n")
    assert stored.name == ("invoicetxt.hta" + "x" * 1000)[:NAME_MAX - 4] + ".txt"


@pytest.mark.django_db
def test_a_name_that_is_not_utf8_in_the_multipart_header_is_a_400_naming_the_file(alice, make_session):
    # Browsers send UTF-8 (FormData always does); a header that is not is not read as a file.
    session = make_session(alice)
    boundary = "AgentLoomBoundary"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"".encode()
            + b"caf\xe9\xff\x85.hta\"\r\nContent-Type: text/plain\r\n\r\nsome notes\n\r\n"
            + f"--{boundary}--\r\n".encode())
    response = client_of(alice).post(f"/api/v1/sessions/{session.pk}/files", data=body,
                                     content_type=f"multipart/form-data; boundary={boundary}")
    assert "file" in assert_error_shape(response, 400)["fields"]
    assert not SessionFile.objects.exists()


@pytest.mark.django_db
def test_a_name_stored_before_these_rules_is_downloaded_cleaned(alice, make_session):
    session = make_session(alice)
    client = client_of(alice)
    file_id = upload(client, session.pk, "notes.txt", b"older upload\n").json()["id"]
    stored = SessionFile.objects.get(pk=file_id)
    stored.name = "invoice\u202etxt.hta"  # as an older version kept it
    stored.save(update_fields=["name"])
    download = client.get(f"/api/v1/files/{file_id}")
    assert download["Content-Disposition"] == 'attachment; filename="invoicetxt.hta.txt"'


@pytest.mark.django_db
def test_a_latin_1_name_declared_in_the_header_is_read_and_cleaned(alice, make_session):
    session = make_session(alice)
    boundary = "AgentLoomBoundary"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
            "filename*=iso-8859-1''caf%E9%85.hta\r\nContent-Type: text/plain\r\n\r\nsome notes\n\r\n"
            f"--{boundary}--\r\n").encode()
    response = client_of(alice).post(f"/api/v1/sessions/{session.pk}/files", data=body,
                                     content_type=f"multipart/form-data; boundary={boundary}")
    assert response.status_code == 201, response.content
    assert response.json()["name"] == "café.hta.txt"  # U+0085 (a C1 control) dropped


def test_a_bound_in_words_never_says_more_than_the_bound():
    """3,750,000 bytes read "4 MB": a person with a 3.8 MB image was told it fits."""
    from sessions.services.files import megabytes

    assert megabytes(3_750_000) == "3.5 MB"
    assert megabytes(10 * 1024 * 1024) == "10 MB" and megabytes(50 * 1024 * 1024) == "50 MB"
    assert megabytes(512 * 1024) == "512 KB"
