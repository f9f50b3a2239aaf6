package guard

import (
	"strings"
	"testing"
)

var benchBlocklist = []string{
	"darn", "heck", "bloody hell", "scam artist", "idiot", "moron", "stupid bot",
	"kill yourself", "self-harm", "shut up", "crap", "damn", "screw you",
	"rip-off", "fraudster", "liar", "useless", "garbage", "trash company", "sue you",
}

// benchMessage is a realistic 1.5 KB support message with numbers, dates
// and an order number but nothing to find.
func benchMessage() string {
	msg := `Hello, I placed order #A-77231 on 2024-03-14 for a pair of running shoes (size 44, colour blue) and a water bottle. ` +
		`The tracking page said it would arrive within 3-5 business days, but it has now been almost two weeks and the status ` +
		`still shows "label created". I contacted the courier on Monday and they told me they never received the parcel from ` +
		`your warehouse. Could you please check what happened? If the parcel is lost, I would like a replacement sent by express ` +
		`delivery, because I need the shoes for a race on the 30th. If that is not possible, please refund the full amount ` +
		`(129.90 EUR including 4.90 shipping) to the original payment method. I also noticed that the invoice lists the wrong ` +
		`billing address: it should be Hauptstrasse 12, 10115 Berlin, not the old address in Hamburg. Can you correct that and ` +
		`send me an updated invoice? One more question about your returns policy: the bottle arrived with a small dent in the ` +
		`lid. Is it possible to return only the bottle and keep the shoes, and do I have to pay for the return label in that ` +
		`case? The website says returns are free within 30 days, but the FAQ mentions a fee for partial returns, which is ` +
		`confusing. Finally, I would like to know whether the shoes are covered by the two-year warranty if the sole comes ` +
		`loose, as happened with my previous pair. I have been a customer for many years and was always happy with your service, ` +
		`so I hope we can sort this out quickly. Thank you very much for your help and have a nice day. Best regards, Maria`
	return msg
}

func BenchmarkCheckLocal(b *testing.B) {
	g := newGuard(b, Config{Blocklist: benchBlocklist})
	msg := benchMessage()
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		g.CheckLocal(msg)
	}
}

// BenchmarkCheckLocalRedact is the same message with a card, an e-mail
// address and a flagged blocklist word to redact.
func BenchmarkCheckLocalRedact(b *testing.B) {
	g := newGuard(b, Config{Blocklist: benchBlocklist, BlocklistAction: Flag})
	msg := strings.Replace(benchMessage(), "Best regards", "My card is 4111 1111 1111 1111 and my mail maria@example.de, damn. Best regards", 1)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		g.CheckLocal(msg)
	}
}
